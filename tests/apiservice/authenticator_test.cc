#define BOOST_TEST_MODULE apiservice_authenticator
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "apiservice/authenticator.h"
#include "apiservice/pki.h"
#include "store/api_error.h"

namespace poolcoord::apiservice {
namespace {

namespace fs = std::filesystem;
using Groups = std::vector<std::string>;

CertKeyPem MakeCa(const std::string& cn) {
  CertSpec spec;
  spec.common_name = cn;
  spec.is_ca = true;
  return *CreateCertificate(spec, nullptr);
}

CertKeyPem MakeClient(const CertKeyPem& ca, const std::string& cn, Groups orgs = {},
                      bool client_auth = true, long offset_seconds = 0) {
  CertSpec spec;
  spec.common_name = cn;
  spec.organizations = std::move(orgs);
  spec.client_auth = client_auth;
  spec.server_auth = !client_auth;
  spec.valid_days = 1;
  spec.validity_offset_seconds = offset_seconds;
  return *CreateCertificate(spec, &ca);
}

std::shared_ptr<const PeerCertificates> Peer(const CertKeyPem& leaf,
                                             const std::string& chain = "") {
  return *PeerCertificates::FromPem(leaf.cert_pem, chain);
}

int HttpCode(const absl::Status& st) { return store::ApiErrorFromStatus(st).code; }

// Two CAs (clients, front proxy) and a token file in a temporary directory.
struct Fixture {
  Fixture() {
    std::string tmpl = (fs::temp_directory_path() / "authn_test.XXXXXX").string();
    dir = mkdtemp(tmpl.data());
    client_ca = MakeCa("client-ca");
    proxy_ca = MakeCa("front-proxy-ca");
    std::ofstream(dir + "/client-ca.crt") << client_ca.cert_pem;
    std::ofstream(dir + "/proxy-ca.crt") << proxy_ca.cert_pem;
    std::ofstream(dir + "/tokens.csv")
        << "tok-admin,admin-by-token,uid-1,\"system:masters\"\n"
        << "\n"
        << "tok-multi, bob,uid-2,\"team-a,team-b\",ignored-column\n"
        << "tok-nogroups,carol,uid-3\n";
    options.client_ca_file = dir + "/client-ca.crt";
    options.requestheader_client_ca_file = dir + "/proxy-ca.crt";
    options.token_auth_file = dir + "/tokens.csv";
  }
  ~Fixture() { fs::remove_all(dir); }
  std::unique_ptr<Authenticator> Make() {
    absl::StatusOr<std::unique_ptr<Authenticator>> a = Authenticator::Create(options);
    BOOST_REQUIRE_MESSAGE(a.ok(), a.status().ToString());
    return *std::move(a);
  }
  std::string dir;
  CertKeyPem client_ca, proxy_ca;
  AuthenticatorOptions options;
};

BOOST_FIXTURE_TEST_SUITE(X509Authentication, Fixture)

BOOST_AUTO_TEST_CASE(ValidClientCertGivesUserAndGroups) {
  auto authn = Make();
  auto peer = Peer(MakeClient(client_ca, "system:node:hz-1", {"system:nodes", "edge"}));
  absl::StatusOr<base::UserInfo> u = authn->Authenticate({}, peer.get());
  BOOST_REQUIRE(u.ok());
  BOOST_TEST(u->username == "system:node:hz-1");
  BOOST_TEST(u->groups == (Groups{"system:nodes", "edge", "system:authenticated"}));
  BOOST_TEST(u->NodeName() == "hz-1");
  // The cached verification gives the same answer.
  BOOST_TEST(authn->Authenticate({}, peer.get())->username == "system:node:hz-1");
}

BOOST_AUTO_TEST_CASE(CertFromAnotherCaIs401NotAnonymous) {
  auto authn = Make();
  CertKeyPem rogue = MakeCa("rogue");
  auto peer = Peer(MakeClient(rogue, "intruder", {"system:masters"}));
  absl::StatusOr<base::UserInfo> u = authn->Authenticate({}, peer.get());
  BOOST_REQUIRE(!u.ok());
  BOOST_TEST(HttpCode(u.status()) == 401);
  BOOST_TEST(store::ApiErrorFromStatus(u.status()).reason == "Unauthorized");
}

BOOST_AUTO_TEST_CASE(ServerOnlyOrExpiredCertIsRejected) {
  auto authn = Make();
  auto server_only = Peer(MakeClient(client_ca, "svc", {}, /*client_auth=*/false));
  BOOST_TEST(HttpCode(authn->Authenticate({}, server_only.get()).status()) == 401);
  auto expired = Peer(MakeClient(client_ca, "old", {}, true, -3 * 86400));
  BOOST_TEST(HttpCode(authn->Authenticate({}, expired.get()).status()) == 401);
}

BOOST_AUTO_TEST_CASE(IntermediatesComeFromThePeerChain) {
  CertSpec mid_spec;
  mid_spec.common_name = "intermediate";
  mid_spec.is_ca = true;
  CertKeyPem mid = *CreateCertificate(mid_spec, &client_ca);
  auto authn = Make();
  CertKeyPem leaf = MakeClient(mid, "dave", {"g"});
  BOOST_TEST(authn->Authenticate({}, Peer(leaf, mid.cert_pem).get())->username == "dave");
  BOOST_TEST(HttpCode(authn->Authenticate({}, Peer(leaf).get()).status()) == 401);
}

BOOST_AUTO_TEST_CASE(NoCredentialsIsAnonymous) {
  auto authn = Make();
  absl::StatusOr<base::UserInfo> u = authn->Authenticate({}, nullptr);
  BOOST_REQUIRE(u.ok());
  BOOST_TEST(IsAnonymous(*u));
  BOOST_TEST(u->groups == Groups{"system:unauthenticated"});
  BOOST_TEST(!u->InGroup("system:authenticated"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(TokenAuthentication, Fixture)

BOOST_AUTO_TEST_CASE(ParsesKubeCsv) {
  absl::StatusOr<std::vector<TokenEntry>> t = ParseTokenFile(
      "t1,alice,u1,\"g1,g2\"\n"
      "t2,bob,u2\r\n"
      "\n"
      "\"t,3\",\"eve \"\"the\"\" admin\",u3,solo\n");
  BOOST_REQUIRE(t.ok());
  BOOST_REQUIRE(t->size() == 3u);
  BOOST_TEST((*t)[0].user.groups == (Groups{"g1", "g2"}));
  BOOST_TEST((*t)[1].user.username == "bob");
  BOOST_TEST((*t)[1].user.groups.empty());
  BOOST_TEST((*t)[2].token == "t,3");
  BOOST_TEST((*t)[2].user.username == "eve \"the\" admin");
  BOOST_TEST((*t)[2].user.groups == Groups{"solo"});
  absl::StatusOr<std::vector<TokenEntry>> bad = ParseTokenFile("ok,user,uid\nonly,two\n");
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(std::string(bad.status().message()).find("line 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(BearerTokens) {
  auto authn = Make();
  absl::StatusOr<base::UserInfo> u =
      authn->Authenticate({{"authorization", "Bearer tok-multi"}}, nullptr);
  BOOST_REQUIRE(u.ok());
  BOOST_TEST(u->username == "bob");
  BOOST_TEST(u->uid == "uid-2");
  BOOST_TEST(u->groups == (Groups{"team-a", "team-b", "system:authenticated"}));
  BOOST_TEST(authn->Authenticate({{"authorization", "bearer tok-admin"}}, nullptr)->IsMaster());
  absl::StatusOr<base::UserInfo> bad =
      authn->Authenticate({{"authorization", "Bearer nope"}}, nullptr);
  BOOST_TEST(HttpCode(bad.status()) == 401);
  // Not a bearer credential at all: anonymous, as kube-apiserver's token authenticator.
  BOOST_TEST(IsAnonymous(*authn->Authenticate({{"authorization", "Basic abc"}}, nullptr)));
}

BOOST_AUTO_TEST_CASE(MissingTokenFileFailsCreate) {
  options.token_auth_file = dir + "/missing.csv";
  BOOST_TEST(!Authenticator::Create(options).ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(FrontProxy, Fixture)

BOOST_AUTO_TEST_CASE(HeadersIgnoredWithoutFrontProxyCert) {
  auto authn = Make();
  handlers::HeaderList headers = {{"x-remote-user", "admin"},
                                  {"x-remote-group", "system:masters"}};
  // A client certificate of the client CA: the headers are ignored.
  auto node = Peer(MakeClient(client_ca, "system:node:hz-1", {"system:nodes"}));
  absl::StatusOr<base::UserInfo> u = authn->Authenticate(headers, node.get());
  BOOST_REQUIRE(u.ok());
  BOOST_TEST(u->username == "system:node:hz-1");
  BOOST_TEST(!u->IsMaster());
  // No certificate: still anonymous.
  BOOST_TEST(IsAnonymous(*authn->Authenticate(headers, nullptr)));
}

BOOST_AUTO_TEST_CASE(UserGroupsAndExtra) {
  options.requestheader_allowed_names = {"front-proxy-client"};
  options.requestheader_username_headers = {"X-Remote-User", "X-Alt-User"};
  auto authn = Make();
  auto proxy = Peer(MakeClient(proxy_ca, "front-proxy-client"));
  handlers::HeaderList headers = {
      {"x-alt-user", "fallback"},
      {"x-remote-user", "system:node:bj-1"},
      {"x-remote-group", "system:nodes"},
      {"x-remote-group", "a,b"},
      {"x-remote-extra-scopes", "view"},
      {"x-remote-extra-scopes", "edit"},
      {"x-remote-extra-example.org%2fteam", "blue"},
      // Lower-cased first (the transport does), then decoded: %41 stays "A".
      {"x-remote-extra-key%41", "v"},
      // A malformed escape keeps the key as sent (unescapeExtraKey); '+' is no space.
      {"x-remote-extra-bad%zz", "w"},
      {"x-remote-extra-a+b%2", "x"},
  };
  absl::StatusOr<base::UserInfo> u = authn->Authenticate(headers, proxy.get());
  BOOST_REQUIRE_MESSAGE(u.ok(), u.status().ToString());
  BOOST_TEST(u->extra.at("keyA") == Groups{"v"});
  BOOST_TEST(u->extra.at("bad%zz") == Groups{"w"});
  BOOST_TEST(u->extra.at("a+b%2") == Groups{"x"});
  BOOST_TEST(u->username == "system:node:bj-1");
  BOOST_TEST(u->groups == (Groups{"system:nodes", "a,b", "system:authenticated"}));
  BOOST_TEST(u->extra.at("scopes") == (Groups{"view", "edit"}));
  BOOST_TEST(u->extra.at("example.org/team") == Groups{"blue"});

  // Only an empty X-Remote-User: the second username header counts.
  handlers::HeaderList alt = {{"x-remote-user", ""}, {"x-alt-user", "fallback"}};
  BOOST_TEST(authn->Authenticate(alt, proxy.get())->username == "fallback");
}

BOOST_AUTO_TEST_CASE(DisallowedCommonNameIsRejected) {
  options.requestheader_allowed_names = {"front-proxy-client"};
  auto authn = Make();
  auto other = Peer(MakeClient(proxy_ca, "someone-else"));
  absl::StatusOr<base::UserInfo> u =
      authn->Authenticate({{"x-remote-user", "admin"}, {"x-remote-group", "system:masters"}},
                          other.get());
  BOOST_REQUIRE(!u.ok());
  BOOST_TEST(HttpCode(u.status()) == 401);
}

BOOST_AUTO_TEST_CASE(EmptyAllowedNamesAcceptsAnyCn) {
  auto authn = Make();
  auto proxy = Peer(MakeClient(proxy_ca, "anything"));
  absl::StatusOr<base::UserInfo> u =
      authn->Authenticate({{"x-remote-user", "system:kube-aggregator"}}, proxy.get());
  BOOST_REQUIRE(u.ok());
  BOOST_TEST(u->username == "system:kube-aggregator");
  BOOST_TEST(u->groups == Groups{"system:authenticated"});
}

BOOST_AUTO_TEST_SUITE_END()

// A TokenReviewer that answers from a table and counts what it was asked.
class FakeTokenReviewer : public TokenReviewer {
 public:
  absl::StatusOr<TokenReviewResult> Review(const std::string& token) override {
    asked.push_back(token);
    if (unreachable) return absl::UnavailableError("connection refused");
    TokenReviewResult r;
    if (token == "cloud-token") {
      r.authenticated = true;
      r.user.username = "system:serviceaccount:edge:agent";
      r.user.groups = {"system:serviceaccounts"};
    }
    return r;
  }
  std::vector<std::string> asked;
  bool unreachable = false;
};

BOOST_FIXTURE_TEST_SUITE(DelegatedTokens, Fixture)

BOOST_AUTO_TEST_CASE(TheTokenFileIsAskedFirst) {
  FakeTokenReviewer reviewer;
  options.token_reviewer = &reviewer;
  auto authn = Make();
  BOOST_TEST(authn->Authenticate({{"authorization", "Bearer tok-multi"}}, nullptr)->username == "bob");
  BOOST_TEST(reviewer.asked.empty());
}

BOOST_AUTO_TEST_CASE(UnknownTokensGoToTokenReview) {
  FakeTokenReviewer reviewer;
  options.token_reviewer = &reviewer;
  auto authn = Make();
  absl::StatusOr<base::UserInfo> u =
      authn->Authenticate({{"authorization", "Bearer cloud-token"}}, nullptr);
  BOOST_REQUIRE(u.ok());
  BOOST_TEST(u->username == "system:serviceaccount:edge:agent");
  BOOST_TEST(u->groups == (Groups{"system:serviceaccounts", "system:authenticated"}));
  BOOST_TEST(HttpCode(authn->Authenticate({{"authorization", "Bearer nope"}}, nullptr).status()) ==
             401);
  BOOST_TEST(reviewer.asked == (Groups{"cloud-token", "nope"}));
  reviewer.unreachable = true;
  BOOST_TEST(HttpCode(
                 authn->Authenticate({{"authorization", "Bearer cloud-token"}}, nullptr).status()) ==
             401);
}

BOOST_AUTO_TEST_CASE(ACertificateWinsOverATokenWithoutAReview) {
  FakeTokenReviewer reviewer;
  options.token_reviewer = &reviewer;
  auto authn = Make();
  auto node = Peer(MakeClient(client_ca, "system:node:hz-1", {"system:nodes"}));
  BOOST_TEST(authn->Authenticate({{"authorization", "Bearer cloud-token"}}, node.get())->username ==
             "system:node:hz-1");
  BOOST_TEST(reviewer.asked.empty());
}

BOOST_AUTO_TEST_CASE(ReviewerWithoutTokenFile) {
  FakeTokenReviewer reviewer;
  options.token_auth_file.clear();
  options.token_reviewer = &reviewer;
  auto authn = Make();
  BOOST_TEST(authn->Authenticate({{"authorization", "Bearer cloud-token"}}, nullptr).ok());
  BOOST_TEST(IsAnonymous(*authn->Authenticate({}, nullptr)));
}

BOOST_AUTO_TEST_SUITE_END()

// The ConfigMap kube-system/extension-apiserver-authentication applied on top of
// the flags.
struct ConfigMapFixture : Fixture {
  ConfigMapFixture() {
    cm_proxy_ca = MakeCa("cluster-front-proxy-ca");
    cm_client_ca = MakeCa("cluster-client-ca");
    config.exists = true;
    config.client_ca_pem = cm_client_ca.cert_pem;
    config.requestheader_client_ca_pem = cm_proxy_ca.cert_pem;
    config.requestheader_allowed_names = {"front-proxy-client"};
    config.requestheader_username_headers = {"X-Remote-User"};
    config.requestheader_group_headers = {"X-Remote-Group"};
    config.requestheader_extra_headers_prefix = {"X-Remote-Extra-"};
  }
  CertKeyPem cm_proxy_ca, cm_client_ca;
  AuthenticationConfigMap config;
};

BOOST_FIXTURE_TEST_SUITE(ConfigMapConfiguration, ConfigMapFixture)

BOOST_AUTO_TEST_CASE(TheConfigMapsFrontProxyCaIsHonoured) {
  options.requestheader_client_ca_file.clear();
  auto authn = Make();
  auto proxy = Peer(MakeClient(cm_proxy_ca, "front-proxy-client"));
  handlers::HeaderList headers = {{"x-remote-user", "carol"}, {"x-remote-group", "g1"},
                                  {"x-remote-group", "g2"}};
  BOOST_TEST(HttpCode(authn->Authenticate(headers, proxy.get()).status()) == 401);
  BOOST_REQUIRE(authn->ApplyConfigMap(config).ok());
  absl::StatusOr<base::UserInfo> u = authn->Authenticate(headers, proxy.get());
  BOOST_REQUIRE_MESSAGE(u.ok(), u.status().ToString());
  BOOST_TEST(u->username == "carol");
  BOOST_TEST(u->groups == (Groups{"g1", "g2", "system:authenticated"}));
  // Its allowed names apply to its CA.
  auto other = Peer(MakeClient(cm_proxy_ca, "not-the-proxy"));
  BOOST_TEST(HttpCode(authn->Authenticate(headers, other.get()).status()) == 401);
  // Deleted: its CA is no longer trusted.
  BOOST_REQUIRE(authn->ApplyConfigMap(AuthenticationConfigMap{}).ok());
  BOOST_TEST(HttpCode(authn->Authenticate(headers, proxy.get()).status()) == 401);
}

BOOST_AUTO_TEST_CASE(ItsHeaderNamesApplyToItsCa) {
  options.requestheader_client_ca_file.clear();
  config.requestheader_username_headers = {"X-Cluster-User"};
  auto authn = Make();
  BOOST_REQUIRE(authn->ApplyConfigMap(config).ok());
  auto proxy = Peer(MakeClient(cm_proxy_ca, "front-proxy-client"));
  BOOST_TEST(authn->Authenticate({{"x-cluster-user", "dan"}}, proxy.get())->username == "dan");
  // X-Remote-User is not one of its username headers: nobody, then 401.
  BOOST_TEST(HttpCode(authn->Authenticate({{"x-remote-user", "dan"}}, proxy.get()).status()) == 401);
}

BOOST_AUTO_TEST_CASE(TheFlagsFrontProxyKeepsItsOwnSettings) {
  options.requestheader_allowed_names = {"flag-proxy"};
  auto authn = Make();
  BOOST_REQUIRE(authn->ApplyConfigMap(config).ok());
  handlers::HeaderList headers = {{"x-remote-user", "erin"}};
  // The flag CA with the flag's allowed name, and the ConfigMap's CA with its own.
  BOOST_TEST(authn->Authenticate(headers, Peer(MakeClient(proxy_ca, "flag-proxy")).get())->username ==
             "erin");
  BOOST_TEST(authn->Authenticate(headers, Peer(MakeClient(cm_proxy_ca, "front-proxy-client")).get())
                 ->username == "erin");
  // Names do not cross over between the two.
  BOOST_TEST(HttpCode(authn->Authenticate(headers, Peer(MakeClient(proxy_ca, "front-proxy-client")).get())
                          .status()) == 401);
  BOOST_TEST(HttpCode(authn->Authenticate(headers, Peer(MakeClient(cm_proxy_ca, "flag-proxy")).get())
                          .status()) == 401);
}

BOOST_AUTO_TEST_CASE(TheConfigMapsClientCaIsAddedToThePool) {
  auto authn = Make();
  auto cluster_user = Peer(MakeClient(cm_client_ca, "frank", {"ops"}));
  auto flag_user = Peer(MakeClient(client_ca, "gina"));
  BOOST_TEST(HttpCode(authn->Authenticate({}, cluster_user.get()).status()) == 401);
  BOOST_REQUIRE(authn->ApplyConfigMap(config).ok());
  BOOST_TEST(authn->Authenticate({}, cluster_user.get())->username == "frank");
  BOOST_TEST(authn->Authenticate({}, flag_user.get())->username == "gina");
}

BOOST_AUTO_TEST_CASE(AnUnusableCaKeepsThePreviousConfiguration) {
  auto authn = Make();
  BOOST_REQUIRE(authn->ApplyConfigMap(config).ok());
  AuthenticationConfigMap broken = config;
  broken.requestheader_client_ca_pem = "not a certificate";
  BOOST_TEST(absl::IsInvalidArgument(authn->ApplyConfigMap(broken)));
  auto proxy = Peer(MakeClient(cm_proxy_ca, "front-proxy-client"));
  BOOST_TEST(authn->Authenticate({{"x-remote-user", "hank"}}, proxy.get())->username == "hank");
}

BOOST_AUTO_TEST_SUITE_END()

// --client-ca-file and --requestheader-client-ca-file replaced while serving
// (the input that showed a defect: a CA appended to --client-ca-file did not
// admit its clients).
BOOST_FIXTURE_TEST_SUITE(FileCaBundles, ConfigMapFixture)

BOOST_AUTO_TEST_CASE(AnAppendedClientCaAdmitsItsClients) {
  auto authn = Make();
  CertKeyPem second_ca = MakeCa("client-ca-2");
  auto newcomer = Peer(MakeClient(second_ca, "ivy", {"ops"}));
  auto old_user = Peer(MakeClient(client_ca, "gina"));
  BOOST_TEST(HttpCode(authn->Authenticate({}, newcomer.get()).status()) == 401);
  BOOST_REQUIRE(authn->SetFileCaBundles(client_ca.cert_pem + second_ca.cert_pem, proxy_ca.cert_pem)
                    .ok());
  absl::StatusOr<base::UserInfo> u = authn->Authenticate({}, newcomer.get());
  BOOST_REQUIRE_MESSAGE(u.ok(), u.status().ToString());
  BOOST_TEST(u->username == "ivy");
  BOOST_TEST(authn->Authenticate({}, old_user.get())->username == "gina");
  // Removed again: its clients are refused, also on a connection that was
  // verified before (the memo is per trust store).
  BOOST_REQUIRE(authn->SetFileCaBundles(client_ca.cert_pem, proxy_ca.cert_pem).ok());
  BOOST_TEST(HttpCode(authn->Authenticate({}, newcomer.get()).status()) == 401);
}

BOOST_AUTO_TEST_CASE(ANewFrontProxyCaReplacesTheOld) {
  auto authn = Make();
  CertKeyPem next_proxy_ca = MakeCa("front-proxy-ca-2");
  handlers::HeaderList headers = {{"x-remote-user", "jo"}};
  auto old_proxy = Peer(MakeClient(proxy_ca, "front-proxy-client"));
  auto new_proxy = Peer(MakeClient(next_proxy_ca, "front-proxy-client"));
  BOOST_TEST(authn->Authenticate(headers, old_proxy.get())->username == "jo");
  BOOST_REQUIRE(authn->SetFileCaBundles(client_ca.cert_pem, next_proxy_ca.cert_pem).ok());
  BOOST_TEST(authn->Authenticate(headers, new_proxy.get())->username == "jo");
  BOOST_TEST(HttpCode(authn->Authenticate(headers, old_proxy.get()).status()) == 401);
}

BOOST_AUTO_TEST_CASE(ABundleWithoutCertificatesChangesNothing) {
  auto authn = Make();
  auto user = Peer(MakeClient(client_ca, "gina"));
  BOOST_TEST(absl::IsInvalidArgument(authn->SetFileCaBundles("-----BEGIN", proxy_ca.cert_pem)));
  BOOST_TEST(authn->Authenticate({}, user.get())->username == "gina");
}

BOOST_AUTO_TEST_CASE(TheAcceptedCasAreTheUnionAndTheListenerHearsOfChanges) {
  auto authn = Make();
  int changes = 0;
  authn->SetTrustChangedListener([&changes] { ++changes; });
  auto has = [](const std::string& pem, const CertKeyPem& ca) {
    return pem.find(ca.cert_pem) != std::string::npos;
  };
  BOOST_TEST(has(authn->AcceptedCaPem(), client_ca));
  BOOST_TEST(has(authn->AcceptedCaPem(), proxy_ca));
  BOOST_TEST(!has(authn->AcceptedCaPem(), cm_client_ca));
  BOOST_REQUIRE(authn->ApplyConfigMap(config).ok());
  BOOST_TEST(has(authn->AcceptedCaPem(), cm_client_ca));
  BOOST_TEST(has(authn->AcceptedCaPem(), cm_proxy_ca));
  CertKeyPem second_ca = MakeCa("client-ca-2");
  BOOST_REQUIRE(authn->SetFileCaBundles(second_ca.cert_pem, proxy_ca.cert_pem).ok());
  BOOST_TEST(has(authn->AcceptedCaPem(), second_ca));
  BOOST_TEST(!has(authn->AcceptedCaPem(), client_ca));
  BOOST_TEST(has(authn->AcceptedCaPem(), cm_client_ca));  // the ConfigMap's stays
  BOOST_TEST(changes == 2);
  BOOST_TEST(!authn->SetFileCaBundles(second_ca.cert_pem, "garbage").ok());
  BOOST_TEST(changes == 2);  // a refused change is no change
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Anonymous)

BOOST_AUTO_TEST_CASE(AllowedPaths) {
  for (const char* path : {"/healthz", "/livez", "/readyz", "/readyz/ping", "/version", "/metrics"}) {
    BOOST_TEST(AnonymousAllowed("GET", path), path);
  }
  BOOST_TEST(AnonymousAllowed("POST", "/validate-delegated-heartbeat"));
  BOOST_TEST(!AnonymousAllowed("GET", "/validate-delegated-heartbeat"));
  BOOST_TEST(!AnonymousAllowed("GET", "/readyzz"));
  BOOST_TEST(!AnonymousAllowed("GET", "/apis"));
  BOOST_TEST(!AnonymousAllowed("GET", "/apis/coordination.pool/v1alpha1/poolleases"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
