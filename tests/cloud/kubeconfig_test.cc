#define BOOST_TEST_MODULE kubeconfig
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "cloud/kubeconfig.h"

namespace poolcoord::cloud {
namespace {

namespace fs = std::filesystem;

// A throw-away directory of kubeconfig files.
struct Dir {
  Dir() {
    std::string tmpl = (fs::temp_directory_path() / "kubeconfig_test.XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~Dir() { fs::remove_all(path); }
  std::string Write(const std::string& rel, const std::string& text, bool executable = false) {
    const fs::path p = fs::path(path) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    if (executable) chmod(p.c_str(), 0755);
    return p.string();
  }
  std::string path;
};

// Two files that both name cluster "shared" and user "u"; the first sets no
// current-context, the second does.
struct TwoFiles : Dir {
  TwoFiles() {
    first = Write("one/config",
                  "clusters:\n"
                  "- name: shared\n  cluster: {server: https://first:6443, certificate-authority: ca.crt}\n"
                  "- name: only-first\n  cluster: {server: https://only-first:6443}\n"
                  "users:\n"
                  "- name: u\n  user: {token: first-token}\n"
                  "contexts:\n"
                  "- name: one\n  context: {cluster: shared, user: u}\n");
    second = Write("two/config",
                   "current-context: two\n"
                   "clusters:\n"
                   "- name: shared\n  cluster: {server: https://second:6443}\n"
                   "- name: data\n  cluster:\n    server: https://data:6443\n"
                   "    certificate-authority-data: " + absl::Base64Escape("PEM") + "\n"
                   "users:\n"
                   "- name: u\n  user: {token: second-token}\n"
                   "- name: file-user\n  user: {tokenFile: tok, client-certificate: c.crt, client-key: /abs/c.key}\n"
                   "contexts:\n"
                   "- name: two\n  context: {cluster: only-first, user: file-user}\n"
                   "- name: data\n  context: {cluster: data, user: u}\n"
                   "- name: dangling\n  context: {cluster: nowhere, user: u}\n");
    Write("two/tok", " file-token\n");
  }
  KubeconfigLoadingRules Rules() const {
    KubeconfigLoadingRules r;
    r.precedence = {first, path + "/missing", second};
    return r;
  }
  std::string first, second;
};

absl::StatusOr<ClientConfig> Load(const KubeconfigLoadingRules& r, KubeconfigOverrides o = {}) {
  return LoadClientConfig(r, o);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(merge)

BOOST_FIXTURE_TEST_CASE(first_file_wins_each_name_and_paths_stay_with_their_file, TwoFiles) {
  // current-context comes from the second file (the first sets none); the
  // cluster and user it names are the first file's where both name them.
  auto c = Load(Rules());
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->context == "two");
  BOOST_TEST(c->rest.server == "https://only-first:6443");
  BOOST_TEST(c->rest.bearer_token == "file-token", "tokenFile relative to the second file");
  BOOST_TEST(c->rest.tls.cert_file == path + "/two/c.crt");
  BOOST_TEST(c->rest.tls.key_file == "/abs/c.key");
  BOOST_TEST(c->files == (std::vector<std::string>{first, second}), "the missing file is skipped");

  KubeconfigOverrides o;
  o.context = "one";
  c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.server == "https://first:6443", "the first file's \"shared\"");
  BOOST_TEST(c->rest.tls.ca_file == path + "/one/ca.crt");
  BOOST_TEST(c->rest.bearer_token == "first-token");

  o.context = "data";
  c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.tls.ca_data == "PEM");
  BOOST_TEST(c->rest.bearer_token == "first-token", "user u is the first file's");

  // Reversed order: the second file's "shared" and "u" win.
  KubeconfigLoadingRules reversed;
  reversed.precedence = {second, first};
  o.context = "one";
  c = Load(reversed, o);
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->rest.server == "https://second:6443");
  BOOST_TEST(c->rest.bearer_token == "second-token");
}

BOOST_FIXTURE_TEST_CASE(explicit_file_alone, TwoFiles) {
  KubeconfigLoadingRules r = Rules();
  r.explicit_path = first;
  KubeconfigOverrides o;
  auto c = Load(r, o);
  BOOST_TEST(absl::IsInvalidArgument(c.status()), "the first file has no current-context");
  BOOST_TEST(std::string(c.status().message()).find("no current-context") != std::string::npos,
             c.status().message());
  o.context = "two";
  c = Load(r, o);
  BOOST_TEST(absl::IsInvalidArgument(c.status()), "context two is only in the other file");
  BOOST_TEST(std::string(c.status().message()) ==
             "context \"two\" not found in " + first);
  r.explicit_path = path + "/nope";
  c = Load(r, o);
  BOOST_TEST(absl::IsNotFound(c.status()));
  BOOST_TEST(std::string(c.status().message()) ==
             "stat " + path + "/nope: no such file or directory");
}

BOOST_FIXTURE_TEST_CASE(broken_files_are_errors_naming_the_file, TwoFiles) {
  KubeconfigLoadingRules r = Rules();
  r.precedence.push_back(Write("bad", "clusters: [unclosed\n"));
  auto c = Load(r);
  BOOST_TEST(absl::IsInvalidArgument(c.status()));
  BOOST_TEST(std::string(c.status().message()).find("error loading config file \"" + path + "/bad\"") == 0,
             c.status().message());
  r.precedence = {Write("badlist", "users: {a: b}\n")};
  BOOST_TEST(absl::IsInvalidArgument(Load(r).status()));
  r.precedence = {Write("bad64", "current-context: c\nclusters:\n- name: c\n  cluster: {server: https://x, "
                                 "certificate-authority-data: '!!!'}\ncontexts:\n- name: c\n  context: {cluster: c}\n")};
  BOOST_TEST(absl::IsInvalidArgument(Load(r).status()));
  r.precedence = {Write("empty", "")};
  c = Load(r);
  BOOST_TEST(std::string(c.status().message()).find("has no current-context") != std::string::npos,
             c.status().message());
  r.precedence = {};
  c = Load(r);
  BOOST_TEST(std::string(c.status().message()) ==
             "no configuration has been provided: set KUBECONFIG, or pass --kubeconfig or --server");
  // KUBECONFIG=/nonexistent (a newcomer): the message said "set KUBECONFIG".
  r.precedence = {"/nonexistent"};
  c = Load(r);
  BOOST_TEST(std::string(c.status().message()) ==
             "no configuration has been provided: /nonexistent does not exist; point KUBECONFIG at a "
             "kubeconfig file, or pass --kubeconfig or --server");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(overrides)

BOOST_FIXTURE_TEST_CASE(context_cluster_and_user, TwoFiles) {
  KubeconfigOverrides o;
  o.cluster = "data";
  auto c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.server == "https://data:6443");
  BOOST_TEST(c->rest.bearer_token == "file-token", "still the context's user");
  o.user = "u";
  c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->rest.bearer_token == "first-token");
  BOOST_TEST(c->rest.tls.cert_file.empty());
  BOOST_TEST(c->user == "u");
  BOOST_TEST(c->cluster == "data");

  o.user = "nobody";
  c = Load(Rules(), o);
  BOOST_TEST(std::string(c.status().message()) ==
             "user \"nobody\" not found in " + first + ", " + second);
  o = {};
  o.context = "dangling";
  c = Load(Rules(), o);
  BOOST_TEST(std::string(c.status().message()) ==
             "cluster \"nowhere\" not found in " + first + ", " + second);
  o.server = "https://given:1";  // a server makes a missing cluster harmless, as in kubectl
  c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.server == "https://given:1");
}

BOOST_FIXTURE_TEST_CASE(server_tls_and_token_flags, TwoFiles) {
  KubeconfigOverrides o;
  o.context = "data";
  o.server = "127.0.0.1:8443";  // no scheme: https, since a CA is set
  o.token = "flag-token";
  auto c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.server == "https://127.0.0.1:8443");
  BOOST_TEST(c->rest.bearer_token == "flag-token");
  BOOST_TEST(c->rest.tls.ca_data == "PEM");

  // --certificate-authority replaces the cluster's CA data (clientcmd does too).
  o.certificate_authority = "/etc/ca.pem";
  c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->rest.tls.ca_file == "/etc/ca.pem");
  BOOST_TEST(c->rest.tls.ca_data.empty());
  BOOST_TEST(!c->rest.tls.insecure_skip_verify);

  // --insecure-skip-tls-verify drops whatever CA the file had.
  o.certificate_authority.clear();
  o.insecure_skip_tls_verify = true;
  o.context = "one";
  c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->rest.tls.insecure_skip_verify);
  BOOST_TEST(c->rest.tls.ca_file.empty());

  // --token wins over tokenFile, which is then not even read.
  o = {};
  o.token = "t";
  fs::remove(path + "/two/tok");
  c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.bearer_token == "t");
  o.token.clear();
  BOOST_TEST(absl::IsNotFound(Load(Rules(), o).status()), "the tokenFile is gone");

  o.client_certificate = "my.crt";
  o.client_key = "my.key";
  o.token = "t";
  c = Load(Rules(), o);
  BOOST_TEST_REQUIRE(c.ok());
  BOOST_TEST(c->rest.tls.cert_file == "my.crt");
  BOOST_TEST(c->rest.tls.key_file == "my.key");

  // --server alone needs no file; without TLS settings the scheme is http.
  KubeconfigLoadingRules none;
  o = {};
  o.server = "localhost:8080";
  c = Load(none, o);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.server == "http://localhost:8080");
  BOOST_TEST(c->context.empty());
  o.timeout = std::chrono::milliseconds(0);
  BOOST_TEST(Load(none, o)->rest.timeout.count() == 0);
}

BOOST_AUTO_TEST_CASE(kubeconfig_env_is_split_as_kubectl_splits_it) {
  Dir d;
  const char* old_kc = std::getenv("KUBECONFIG");
  const std::string saved = old_kc ? old_kc : "";
  setenv("KUBECONFIG", "a::b:a:c", 1);
  KubeconfigLoadingRules r = KubeconfigLoadingRules::FromEnvironment("");
  BOOST_TEST(r.precedence == (std::vector<std::string>{"a", "b", "c"}));
  BOOST_TEST(KubeconfigLoadingRules::FromEnvironment("x").precedence.empty(),
             "--kubeconfig ignores KUBECONFIG");
  unsetenv("KUBECONFIG");
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";
  setenv("HOME", d.path.c_str(), 1);
  r = KubeconfigLoadingRules::FromEnvironment("");
  BOOST_TEST(r.precedence == (std::vector<std::string>{d.path + "/.kube/config"}));
  BOOST_TEST(NoKubeconfigFiles(r));
  d.Write(".kube/config", "");
  BOOST_TEST(!NoKubeconfigFiles(r));
  setenv("HOME", saved_home.c_str(), 1);
  if (old_kc) setenv("KUBECONFIG", saved.c_str(), 1);
}

BOOST_AUTO_TEST_CASE(request_timeout_as_kubectl_reads_it) {
  auto ms = [](std::string_view t) { return ParseRequestTimeout(t)->count(); };
  BOOST_TEST(ms("0") == 0);
  BOOST_TEST(ms("5") == 5000);
  BOOST_TEST(ms("1s") == 1000);
  BOOST_TEST(ms("1m30s") == 90'000);
  BOOST_TEST(ms("500ms") == 500);
  BOOST_TEST(ms("1.5s") == 1500);
  BOOST_TEST(ms("2h") == 7'200'000);
  for (const char* bad : {"", "abc", "-1", "-1s", "1x", "s", "1s2"}) {
    auto t = ParseRequestTimeout(bad);
    BOOST_TEST(absl::IsInvalidArgument(t.status()), bad);
    if (!t.ok()) {
      BOOST_TEST(std::string(t.status().message()).rfind("Invalid timeout value.", 0) == 0);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(authentication)

// An exec credential plugin (client.authentication.k8s.io) is run when the
// rules allow it: its arguments, environment and KUBERNETES_EXEC_INFO are
// passed, and the token it prints is used.
BOOST_AUTO_TEST_CASE(exec_plugin_gives_the_token) {
  Dir d;
  d.Write("bin/cred",
          "#!/bin/sh\n"
          "echo \"$KUBERNETES_EXEC_INFO\" > \"$(dirname \"$0\")/info\"\n"
          "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
          "\"status\":{\"token\":\"'\"$1-$EXTRA\"'\"}}'\n",
          true);
  d.Write("bin/fails", "#!/bin/sh\necho nope >&2\nexit 3\n", true);
  d.Write("bin/old", "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
                     "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'\n", true);
  const std::string kc = d.Write(
      "config",
      "current-context: c\n"
      "clusters:\n- name: k\n  cluster: {server: https://k:6443}\n"
      "contexts:\n- name: c\n  context: {cluster: k, user: e}\n"
      "- name: fails\n  context: {cluster: k, user: f}\n"
      "- name: old\n  context: {cluster: k, user: o}\n"
      "- name: missing\n  context: {cluster: k, user: m}\n"
      "- name: provider\n  context: {cluster: k, user: p}\n"
      "users:\n"
      "- name: e\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
      "      command: ./bin/cred\n      args: [arg]\n      env: [{name: EXTRA, value: extra}]\n"
      "      interactiveMode: Never\n      provideClusterInfo: true\n"
      "- name: f\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./bin/fails, "
      "interactiveMode: Never}\n"
      "- name: o\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./bin/old, "
      "interactiveMode: Never}\n"
      "- name: m\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: no-such-plugin-xyz, "
      "interactiveMode: Never, installHint: 'install it'}\n"
      "- name: p\n  user:\n    auth-provider: {name: oidc}\n");
  KubeconfigLoadingRules r;
  r.explicit_path = kc;
  auto c = Load(r);
  BOOST_TEST(absl::IsInvalidArgument(c.status()), "not run unless allowed");
  r.allow_exec_plugins = true;
  c = Load(r);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.bearer_token == "arg-extra");
  std::ifstream info(d.path + "/bin/info");
  std::string line;
  std::getline(info, line);
  BOOST_TEST(line ==
             "{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\","
             "\"spec\":{\"cluster\":{\"server\":\"https://k:6443\"},\"interactive\":false}}");

  KubeconfigOverrides o;
  o.context = "fails";
  c = Load(r, o);
  BOOST_TEST(absl::IsUnauthenticated(c.status()));
  BOOST_TEST(std::string(c.status().message()).find("exit code 3") != std::string::npos,
             c.status().message());
  o.context = "old";
  c = Load(r, o);
  BOOST_TEST(absl::IsUnauthenticated(c.status()), "a v1 plugin answering v1beta1");
  o.context = "missing";
  c = Load(r, o);
  BOOST_TEST(absl::IsUnauthenticated(c.status()));
  BOOST_TEST(std::string(c.status().message()).find("install it") != std::string::npos,
             c.status().message());
  o.context = "provider";
  c = Load(r, o);
  BOOST_TEST(absl::IsInvalidArgument(c.status()));
  BOOST_TEST(std::string(c.status().message()).find("auth-provider") != std::string::npos);
  o.token = "static";  // a token given on the command line needs no plugin
  o.context = "fails";
  c = Load(r, o);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->rest.bearer_token == "static");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::cloud
