#include "cloud/kubeconfig.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/string_view.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace poolcoord::cloud {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Str(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap() || !n[key] || !n[key].IsScalar()) return "";
  return n[key].as<std::string>();
}

absl::StatusOr<std::string> DecodeData(const std::string& b64, const std::string& field) {
  std::string out;
  if (!absl::Base64Unescape(b64, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is not valid base64"));
  }
  return out;
}

// One named entry (a cluster, user or context) and the directory of the file
// that defined it, for its relative paths.
struct Entry {
  YAML::Node body;  // the "cluster" / "user" / "context" map
  fs::path dir;
  std::string file;
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::vector<std::string> files;
};

// Adds the named entries of `list` that are not taken yet (the first file wins).
absl::Status MergeNamed(const YAML::Node& list, const char* body_key, const std::string& file,
                        const fs::path& dir, std::map<std::string, Entry>* into) {
  if (!list || list.IsNull()) return absl::OkStatus();
  if (!list.IsSequence()) {
    return absl::InvalidArgumentError(
        absl::StrCat("error loading config file \"", file, "\": ", body_key, "s is not a list"));
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::string name = Str(item, "name");
    if (name.empty()) continue;
    into->emplace(name, Entry{item[body_key], dir, file});
  }
  return absl::OkStatus();
}

absl::Status MergeFile(const std::string& path, Merged* m) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  const fs::path dir = fs::absolute(fs::path(path)).parent_path();
  try {
    YAML::Node root = YAML::Load(*text);
    if (root.IsNull()) {  // an empty file is an empty config
      m->files.push_back(path);
      return absl::OkStatus();
    }
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat("error loading config file \"", path, "\": not a kubeconfig (a YAML map)"));
    }
    if (absl::Status s = MergeNamed(root["clusters"], "cluster", path, dir, &m->clusters); !s.ok()) {
      return s;
    }
    if (absl::Status s = MergeNamed(root["users"], "user", path, dir, &m->users); !s.ok()) return s;
    if (absl::Status s = MergeNamed(root["contexts"], "context", path, dir, &m->contexts); !s.ok()) {
      return s;
    }
    if (m->current_context.empty()) m->current_context = Str(root, "current-context");
    m->files.push_back(path);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("error loading config file \"", path, "\": ", e.what()));
  }
}

std::string Resolve(const fs::path& dir, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (dir / p).string();
}

std::string FileList(const std::vector<std::string>& files) {
  return files.empty() ? "no kubeconfig file" : absl::StrJoin(files, ", ");
}

// ------------------------------------------------------------ exec plugins --

std::string JsonString(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject()) return "";
  auto it = v.FindMember(key);
  return it != v.MemberEnd() && it->value.IsString()
             ? std::string(it->value.GetString(), it->value.GetStringLength())
             : "";
}

// KUBERNETES_EXEC_INFO: the ExecCredential the plugin is handed.
std::string ExecInfo(const std::string& api_version, bool interactive, const RestConfig* cluster) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("ExecCredential");
  w.Key("apiVersion");
  w.String(api_version.c_str());
  w.Key("spec");
  w.StartObject();
  if (cluster != nullptr) {
    w.Key("cluster");
    w.StartObject();
    w.Key("server");
    w.String(cluster->server.c_str());
    if (!cluster->tls.ca_data.empty()) {
      w.Key("certificate-authority-data");
      w.String(absl::Base64Escape(cluster->tls.ca_data).c_str());
    }
    if (cluster->tls.insecure_skip_verify) {
      w.Key("insecure-skip-tls-verify");
      w.Bool(true);
    }
    w.EndObject();
  }
  w.Key("interactive");
  w.Bool(interactive);
  w.EndObject();
  w.EndObject();
  return buf.GetString();
}

// Runs the user's exec credential plugin and puts its token or client
// certificate into `config`, as client-go's exec authenticator does (once:
// this process is short-lived).
absl::Status RunExecPlugin(const YAML::Node& exec, const fs::path& dir, const std::string& user,
                           RestConfig* config) {
  const std::string api_version = Str(exec, "apiVersion");
  if (api_version != "client.authentication.k8s.io/v1" &&
      api_version != "client.authentication.k8s.io/v1beta1") {
    return absl::InvalidArgumentError(absl::StrCat(
        "user \"", user, "\": exec plugin apiVersion \"", api_version,
        "\" is not supported (want client.authentication.k8s.io/v1 or v1beta1)"));
  }
  std::string command = Str(exec, "command");
  if (command.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("user \"", user, "\": exec has no command"));
  }
  // A relative path with a directory part is relative to the kubeconfig.
  if (command.find('/') != std::string::npos) command = Resolve(dir, command);
  std::string mode = Str(exec, "interactiveMode");
  if (mode.empty()) mode = "IfAvailable";
  const bool tty = isatty(STDIN_FILENO) == 1;
  if (mode == "Always" && !tty) {
    return absl::InvalidArgumentError(absl::StrCat(
        "user \"", user, "\": exec plugin cannot support interactive mode: standard input is not "
        "a terminal"));
  }
  const bool interactive = tty && mode != "Never";
  const bool cluster_info = Str(exec, "provideClusterInfo") == "true";

  std::vector<std::string> argv = {command};
  if (const YAML::Node args = exec["args"]; args && args.IsSequence()) {
    for (const auto& a : args) argv.push_back(a.as<std::string>());
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  if (const YAML::Node vars = exec["env"]; vars && vars.IsSequence()) {
    for (const auto& v : vars) env.push_back(absl::StrCat(Str(v, "name"), "=", Str(v, "value")));
  }
  env.push_back(absl::StrCat("KUBERNETES_EXEC_INFO=",
                             ExecInfo(api_version, interactive, cluster_info ? config : nullptr)));

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (!interactive) posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, command.c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    std::string hint = Str(exec, "installHint");
    return absl::UnauthenticatedError(absl::StrCat(
        "getting credentials: exec: executable ", command, " failed: ", std::strerror(rc),
        "\n\nIt looks like you are trying to use a client-go credential plugin that is not "
        "installed.",
        hint.empty() ? "" : absl::StrCat("\n\n", hint)));
  }
  std::string output;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n > 0) {
      output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnauthenticatedError(absl::StrCat(
        "getting credentials: exec: executable ", command, " failed with exit code ",
        WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  rapidjson::Document d;
  d.Parse(output.data(), output.size());
  if (d.HasParseError() || !d.IsObject()) {
    return absl::UnauthenticatedError(
        absl::StrCat("getting credentials: decoding stdout of ", command, ": not JSON"));
  }
  if (JsonString(d, "kind") != "ExecCredential" || JsonString(d, "apiVersion") != api_version) {
    return absl::UnauthenticatedError(absl::StrCat(
        "getting credentials: exec plugin ", command, " answered apiVersion \"",
        JsonString(d, "apiVersion"), "\" kind \"", JsonString(d, "kind"), "\", want ", api_version,
        " ExecCredential"));
  }
  auto status_it = d.FindMember("status");
  if (status_it == d.MemberEnd() || !status_it->value.IsObject()) {
    return absl::UnauthenticatedError(
        absl::StrCat("getting credentials: exec plugin ", command, " didn't return a status field"));
  }
  const rapidjson::Value& st = status_it->value;
  const std::string token = JsonString(st, "token");
  const std::string cert = JsonString(st, "clientCertificateData");
  const std::string key = JsonString(st, "clientKeyData");
  if (token.empty() && (cert.empty() || key.empty())) {
    return absl::UnauthenticatedError(absl::StrCat(
        "getting credentials: exec plugin ", command,
        " didn't return a token or cert/key pair"));
  }
  if (!token.empty()) config->bearer_token = token;
  if (!cert.empty() && !key.empty()) {
    config->tls.cert_data = cert;
    config->tls.key_data = key;
    config->tls.cert_file.clear();
    config->tls.key_file.clear();
  }
  return absl::OkStatus();
}

}  // namespace

KubeconfigLoadingRules KubeconfigLoadingRules::FromEnvironment(const std::string& explicit_path) {
  KubeconfigLoadingRules rules;
  rules.explicit_path = explicit_path;
  if (!explicit_path.empty()) return rules;
  const char* env = std::getenv("KUBECONFIG");
  if (env != nullptr && *env != 0) {
    std::set<std::string> seen;
    for (absl::string_view part : absl::StrSplit(env, ':')) {
      std::string p(part);
      if (p.empty() || !seen.insert(p).second) continue;
      rules.precedence.push_back(std::move(p));
    }
    return rules;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != 0) {
    rules.precedence.push_back((fs::path(home) / ".kube" / "config").string());
  }
  return rules;
}

bool NoKubeconfigFiles(const KubeconfigLoadingRules& rules) {
  if (!rules.explicit_path.empty()) return false;
  for (const auto& p : rules.precedence) {
    std::error_code ec;
    if (fs::exists(p, ec)) return false;
  }
  return true;
}

absl::StatusOr<std::chrono::milliseconds> ParseRequestTimeout(std::string_view text) {
  const absl::Status invalid = absl::InvalidArgumentError(
      "Invalid timeout value. Timeout must be a single integer in seconds, or an integer followed "
      "by a corresponding time unit (e.g. 1s | 2m | 3h)");
  int64_t whole = 0;
  if (absl::SimpleAtoi(base::Av(text), &whole)) {
    if (whole < 0) return invalid;
    return std::chrono::milliseconds(whole * 1000);
  }
  // A Go duration: a sequence of decimal numbers, each with a unit.
  static const std::map<std::string, double, std::less<>> kUnitMs = {
      {"ns", 1e-6}, {"us", 1e-3}, {"\xc2\xb5s", 1e-3}, {"ms", 1}, {"s", 1e3}, {"m", 6e4},
      {"h", 3.6e6}};
  std::string_view s = text;
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || s[0] == '-') return invalid;
  if (s == "0") return std::chrono::milliseconds(0);
  double total_ms = 0;
  while (!s.empty()) {
    size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == 0) return invalid;
    double value = 0;
    if (!absl::SimpleAtod(base::Av(s.substr(0, i)), &value)) return invalid;
    s.remove_prefix(i);
    size_t j = 0;
    while (j < s.size() && !std::isdigit(static_cast<unsigned char>(s[j])) && s[j] != '.') ++j;
    auto unit = kUnitMs.find(s.substr(0, j));
    if (unit == kUnitMs.end()) return invalid;
    total_ms += value * unit->second;
    s.remove_prefix(j);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(total_ms)));
}

absl::StatusOr<ClientConfig> LoadClientConfig(const KubeconfigLoadingRules& rules,
                                              const KubeconfigOverrides& overrides) {
  Merged m;
  if (!rules.explicit_path.empty()) {
    std::error_code ec;
    if (!fs::exists(rules.explicit_path, ec)) {
      return absl::NotFoundError(
          absl::StrCat("stat ", rules.explicit_path, ": no such file or directory"));
    }
    if (absl::Status s = MergeFile(rules.explicit_path, &m); !s.ok()) return s;
  } else {
    for (const auto& p : rules.precedence) {
      std::error_code ec;
      if (!fs::exists(p, ec)) continue;
      if (absl::Status s = MergeFile(p, &m); !s.ok()) return s;
    }
  }

  ClientConfig out;
  out.files = m.files;
  out.context = overrides.context.empty() ? m.current_context : overrides.context;
  std::string cluster_name, user_name;
  if (!out.context.empty()) {
    auto ctx = m.contexts.find(out.context);
    if (ctx == m.contexts.end()) {
      return absl::InvalidArgumentError(absl::StrCat("context \"", out.context, "\" not found in ",
                                                     FileList(m.files)));
    }
    cluster_name = Str(ctx->second.body, "cluster");
    user_name = Str(ctx->second.body, "user");
  }
  if (!overrides.cluster.empty()) cluster_name = overrides.cluster;
  if (!overrides.user.empty()) user_name = overrides.user;
  out.cluster = cluster_name;
  out.user = user_name;

  RestConfig& config = out.rest;
  if (!cluster_name.empty()) {
    auto cl = m.clusters.find(cluster_name);
    if (cl == m.clusters.end()) {
      if (overrides.server.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("cluster \"", cluster_name, "\" not found in ", FileList(m.files)));
      }
    } else {
      const YAML::Node& c = cl->second.body;
      config.server = Str(c, "server");
      config.tls.ca_file = Resolve(cl->second.dir, Str(c, "certificate-authority"));
      if (auto d = Str(c, "certificate-authority-data"); !d.empty()) {
        auto pem = DecodeData(d, absl::StrCat("cluster \"", cluster_name,
                                              "\": certificate-authority-data"));
        if (!pem.ok()) return pem.status();
        config.tls.ca_data = *std::move(pem);
      }
      config.tls.insecure_skip_verify = Str(c, "insecure-skip-tls-verify") == "true";
    }
  }
  if (!user_name.empty()) {
    auto us = m.users.find(user_name);
    if (us == m.users.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("user \"", user_name, "\" not found in ", FileList(m.files)));
    }
    const YAML::Node& u = us->second.body;
    const fs::path& dir = us->second.dir;
    config.tls.cert_file = Resolve(dir, Str(u, "client-certificate"));
    config.tls.key_file = Resolve(dir, Str(u, "client-key"));
    if (auto d = Str(u, "client-certificate-data"); !d.empty()) {
      auto pem = DecodeData(d, absl::StrCat("user \"", user_name, "\": client-certificate-data"));
      if (!pem.ok()) return pem.status();
      config.tls.cert_data = *std::move(pem);
    }
    if (auto d = Str(u, "client-key-data"); !d.empty()) {
      auto pem = DecodeData(d, absl::StrCat("user \"", user_name, "\": client-key-data"));
      if (!pem.ok()) return pem.status();
      config.tls.key_data = *std::move(pem);
    }
    config.bearer_token = Str(u, "token");
    if (auto f = Str(u, "tokenFile"); config.bearer_token.empty() && !f.empty() &&
                                       overrides.token.empty()) {
      auto tok = ReadFile(Resolve(dir, f));
      if (!tok.ok()) return tok.status();
      config.bearer_token = std::string(absl::StripAsciiWhitespace(*tok));
    }
    if (u && u.IsMap() && u["auth-provider"]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "user \"", user_name,
          "\" uses an auth-provider, which is not supported: use an exec credential plugin, a "
          "token or a client certificate"));
    }
    if (!Str(u, "username").empty() || !Str(u, "password").empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "user \"", user_name,
          "\" uses basic authentication (username/password), which is not supported: use a "
          "token or a client certificate"));
    }
  }

  // Flags over the file.
  if (!overrides.server.empty()) config.server = overrides.server;
  if (!overrides.certificate_authority.empty() || overrides.insecure_skip_tls_verify.value_or(false)) {
    config.tls.ca_file = overrides.certificate_authority;
    config.tls.ca_data.clear();
    config.tls.insecure_skip_verify = overrides.insecure_skip_tls_verify.value_or(false);
  } else if (overrides.insecure_skip_tls_verify.has_value()) {
    config.tls.insecure_skip_verify = false;  // --insecure-skip-tls-verify=false
  }
  if (!overrides.token.empty()) config.bearer_token = overrides.token;
  if (!overrides.client_certificate.empty()) {
    config.tls.cert_file = overrides.client_certificate;
    config.tls.cert_data.clear();
  }
  if (!overrides.client_key.empty()) {
    config.tls.key_file = overrides.client_key;
    config.tls.key_data.clear();
  }
  if (overrides.timeout.has_value()) config.timeout = *overrides.timeout;

  if (config.server.empty()) {
    if (m.files.empty() && !rules.precedence.empty()) {
      // KUBECONFIG (or ~/.kube/config) named only files that do not exist:
      // "set KUBECONFIG" would send a user whose KUBECONFIG is set nowhere.
      return absl::InvalidArgumentError(absl::StrCat(
          "no configuration has been provided: ", FileList(rules.precedence),
          rules.precedence.size() == 1 ? " does" : " do", " not exist; point KUBECONFIG at a "
          "kubeconfig file, or pass --kubeconfig or --server"));
    }
    if (m.files.empty()) {
      return absl::InvalidArgumentError(
          "no configuration has been provided: set KUBECONFIG, or pass --kubeconfig or --server");
    }
    if (out.context.empty() && cluster_name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no context chosen: ", FileList(m.files),
          " has no current-context; pass --context, or --cluster and --user, or --server"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cluster \"", cluster_name, "\" has no server"));
  }
  if (!absl::StrContains(config.server, "://")) {
    const bool tls = !config.tls.ca_file.empty() || !config.tls.ca_data.empty() ||
                     !config.tls.cert_file.empty() || !config.tls.cert_data.empty() ||
                     config.tls.insecure_skip_verify;
    config.server = absl::StrCat(tls ? "https://" : "http://", config.server);
  }

  if (!user_name.empty()) {
    auto us = m.users.find(user_name);
    const YAML::Node exec = us->second.body && us->second.body.IsMap() ? us->second.body["exec"]
                                                                       : YAML::Node();
    const bool has_static = !config.bearer_token.empty() ||
                            (!config.tls.cert_file.empty() || !config.tls.cert_data.empty());
    if (exec && exec.IsMap() && !has_static) {
      if (!rules.allow_exec_plugins) {
        return absl::InvalidArgumentError(absl::StrCat(
            "user \"", user_name, "\" uses an exec credential plugin, which is not run here"));
      }
      try {
        if (absl::Status s = RunExecPlugin(exec, us->second.dir, user_name, &config); !s.ok()) {
          return s;
        }
      } catch (const std::exception& e) {
        return absl::InvalidArgumentError(
            absl::StrCat("user \"", user_name, "\": malformed exec: ", e.what()));
      }
    }
  }
  return out;
}

absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  KubeconfigLoadingRules rules;
  rules.explicit_path = path;
  KubeconfigOverrides overrides;
  overrides.context = context;
  absl::StatusOr<ClientConfig> c = LoadClientConfig(rules, overrides);
  if (!c.ok()) return c.status();
  return std::move(c->rest);
}

}  // namespace poolcoord::cloud
