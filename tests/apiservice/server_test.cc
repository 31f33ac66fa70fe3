#define BOOST_TEST_MODULE apiservice_server
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <future>
#include <thread>
#include <tuple>

#include "absl/synchronization/notification.h"
#include "apiservice/metrics.h"
#include "apiservice/pki.h"
#include "apiservice/server.h"
#include "tests/stream_reader.h"

namespace poolcoord::apiservice {
namespace {

namespace fs = std::filesystem;

// A stream of one line, then its end.
class OneLineStream final : public handlers::StreamSource {
 public:
  Step Poll(std::string* out, const std::function<void()>&, Clock::time_point*) override {
    out->append("{}\n");
    return Step::kEnd;
  }
};

// A router that records who reached it; "/block" waits until released; a watch
// request gets a stream that writes once.
class FakeRouter : public handlers::Router {
 public:
  handlers::Response Handle(handlers::Request& request) override {
    last_user = request.user.username;
    handlers::Response r;
    if (request.path.ends_with("/block")) {
      entered.Notify();
      release.WaitForNotification();
    }
    if (request.HasQuery("watch")) {
      r.stream = std::make_shared<OneLineStream>();
    }
    r.body = "ok";
    return r;
  }
  std::string last_user;
  absl::Notification entered, release;
};

struct Fixture {
  Fixture() {
    std::string tmpl = (fs::temp_directory_path() / "server_test.XXXXXX").string();
    dir = mkdtemp(tmpl.data());
    std::ofstream(dir + "/tokens.csv") << "tok-u,user-u,1\n"
                                       << "tok-admin,admin,2,system:masters\n"
                                       << "tok-node,system:node:n1,3,system:nodes\n";
    AuthenticatorOptions a;
    a.token_auth_file = dir + "/tokens.csv";
    authenticator = *Authenticator::Create(a);
    authorizer = std::make_unique<Authorizer>(AuthorizerOptions{});
    limiter = std::make_unique<InflightLimiter>(1);
    PipelineOptions p;
    p.authenticator = authenticator.get();
    p.authorizer = authorizer.get();
    p.router = &router;
    p.metrics = &metrics;
    p.limiter = limiter.get();
    pipeline = std::make_unique<RequestPipeline>(p);
  }
  ~Fixture() { fs::remove_all(dir); }

  handlers::Response Call(const std::string& method, const std::string& path,
                          const std::string& token = "",
                          std::vector<std::pair<std::string, std::string>> query = {}) {
    handlers::Request r;
    r.method = method;
    r.path = path;
    r.query = std::move(query);
    if (!token.empty()) r.headers.emplace_back("authorization", "Bearer " + token);
    return pipeline->Serve(r, ConnectionInfo{});
  }
  static std::string HeaderOf(const handlers::Response& r, const std::string& name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return "";
  }

  std::string dir;
  FakeRouter router;
  base::MetricsRegistry registry;
  Metrics metrics{&registry};
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<Authorizer> authorizer;
  std::unique_ptr<InflightLimiter> limiter;
  std::unique_ptr<RequestPipeline> pipeline;
};

const std::string kPoolLeases = "/apis/coordination.pool/v1alpha1/poolleases";

BOOST_FIXTURE_TEST_SUITE(RequestPipelineTest, Fixture)

BOOST_AUTO_TEST_CASE(AnonymousOnlyOnPublicPaths) {
  BOOST_TEST(Call("GET", "/healthz").status == 200);
  BOOST_TEST(Call("GET", "/metrics").status == 200);
  BOOST_TEST(Call("POST", "/validate-delegated-heartbeat").status == 200);
  handlers::Response r = Call("GET", kPoolLeases);
  BOOST_TEST(r.status == 401);
  BOOST_TEST(r.body.find("\"reason\":\"Unauthorized\"") != std::string::npos);
  BOOST_TEST(Call("GET", "/apis").status == 401);
  BOOST_TEST(Call("GET", kPoolLeases, "bad-token").status == 401);
}

BOOST_AUTO_TEST_CASE(AuthenticatedButForbidden) {
  handlers::Response r = Call("GET", kPoolLeases, "tok-u");
  BOOST_TEST(r.status == 403);
  BOOST_TEST(r.body.find("User \\\"user-u\\\" cannot list resource \\\"poolleases\\\"") !=
             std::string::npos);
  BOOST_TEST(Call("GET", "/apis", "tok-u").status == 200);
  BOOST_TEST(Call("GET", kPoolLeases, "tok-node").status == 200);
  BOOST_TEST(router.last_user == "system:node:n1");
}

// Go's net/http dates every answer; kubectl pool reads the server's clock there.
BOOST_AUTO_TEST_CASE(EveryAnswerCarriesTheServersDate) {
  base::FakeClock clock(784111777'000'000 + 999'999);  // 1994-11-06T08:49:37.999999Z
  PipelineOptions p;
  p.authenticator = authenticator.get();
  p.authorizer = authorizer.get();
  p.router = &router;
  p.clock = &clock;
  RequestPipeline dated(p);
  for (const auto& [path, token, status] :
       std::vector<std::tuple<std::string, std::string, int>>{
           {kPoolLeases, "tok-admin", 200}, {kPoolLeases, "", 401}, {"/healthz", "", 200},
           {kPoolLeases, "tok-u", 403}}) {
    handlers::Request r;
    r.method = "GET";
    r.path = path;
    if (!token.empty()) r.headers.emplace_back("authorization", "Bearer " + token);
    handlers::Response answer = dated.Serve(r, ConnectionInfo{});
    BOOST_TEST(answer.status == status);
    BOOST_TEST(HeaderOf(answer, "Date") == "Sun, 06 Nov 1994 08:49:37 GMT", path);
  }
  clock.Advance(std::chrono::microseconds(1));
  handlers::Request r;
  r.method = "GET";
  r.path = "/healthz";
  BOOST_TEST(HeaderOf(dated.Serve(r, ConnectionInfo{}), "Date") == "Sun, 06 Nov 1994 08:49:38 GMT");
}

BOOST_AUTO_TEST_CASE(InflightLimitAnswers429ButNotForWatchesOrMasters) {
  auto blocked = std::async(std::launch::async,
                            [this] { return Call("GET", kPoolLeases + "/block", "tok-node"); });
  router.entered.WaitForNotification();
  handlers::Response r = Call("GET", kPoolLeases, "tok-node");
  BOOST_TEST(r.status == 429);
  BOOST_TEST(HeaderOf(r, "Retry-After") == "1");
  BOOST_TEST(r.body.find("\"reason\":\"TooManyRequests\"") != std::string::npos);
  BOOST_TEST(Call("GET", kPoolLeases, "tok-node", {{"watch", "true"}}).status == 200);
  BOOST_TEST(Call("GET", kPoolLeases, "tok-admin").status == 200);
  router.release.Notify();
  BOOST_TEST(blocked.get().status == 200);
  BOOST_TEST(Call("GET", kPoolLeases, "tok-node").status == 200);
  BOOST_TEST(limiter->current() == 0);
}

BOOST_AUTO_TEST_CASE(MetricsCountRequestsAndWatchers) {
  Call("GET", kPoolLeases, "tok-node");
  Call("GET", kPoolLeases, "tok-node");
  Call("GET", kPoolLeases);
  handlers::Response watch = Call("GET", kPoolLeases, "tok-node", {{"watch", "true"}});
  BOOST_REQUIRE(watch.stream);
  std::string text = registry.Render();
  BOOST_TEST(text.find("apiserver_request_total{code=\"200\",resource=\"poolleases\",verb=\"LIST\"} 2") !=
             std::string::npos);
  BOOST_TEST(text.find("apiserver_request_total{code=\"401\",resource=\"poolleases\",verb=\"LIST\"} 1") !=
             std::string::npos);
  BOOST_TEST(text.find("apiserver_request_total{code=\"200\",resource=\"poolleases\",verb=\"WATCH\"} 1") !=
             std::string::npos);
  BOOST_TEST(text.find("apiserver_request_duration_seconds_count{resource=\"poolleases\",verb=\"LIST\"} 3") !=
             std::string::npos);
  BOOST_TEST(text.find("verb=\"WATCH\",le=") == std::string::npos);

  // The watcher gauge follows the stream: 1 while the transport holds it, 0 after.
  BOOST_TEST(registry.Render().find("apiserver_registered_watchers{resource=\"poolleases\"} 1") !=
             std::string::npos);
  testing::StreamRead read = testing::ReadStream(*watch.stream, std::chrono::seconds(5));
  BOOST_TEST(read.body == "{}\n");
  watch.stream.reset();
  BOOST_TEST(registry.Render().find("apiserver_registered_watchers{resource=\"poolleases\"} 0") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(MetricsTest)

BOOST_AUTO_TEST_CASE(HistogramBucketsAreCumulative) {
  base::MetricsRegistry registry;
  Metrics m(&registry);
  m.ObserveRequest("GET", "poolleases", 200, 0.003, false);
  m.ObserveRequest("GET", "poolleases", 200, 0.3, false);
  m.ObserveRequest("GET", "poolleases", 404, 100, false);
  m.WatcherStarted("delegatedleases");
  m.WatcherStarted("delegatedleases");
  m.WatcherEnded("delegatedleases");
  std::string text = registry.Render();
  const std::string prefix = "apiserver_request_duration_seconds_bucket{resource=\"poolleases\",verb=\"GET\",le=";
  BOOST_TEST(text.find(prefix + "\"0.005\"} 1\n") != std::string::npos);
  BOOST_TEST(text.find(prefix + "\"0.2\"} 1\n") != std::string::npos);
  BOOST_TEST(text.find(prefix + "\"0.4\"} 2\n") != std::string::npos);
  BOOST_TEST(text.find(prefix + "\"60\"} 2\n") != std::string::npos);
  BOOST_TEST(text.find(prefix + "\"+Inf\"} 3\n") != std::string::npos);
  BOOST_TEST(text.find("apiserver_registered_watchers{resource=\"delegatedleases\"} 1\n") !=
             std::string::npos);
  BOOST_TEST(text.find("# TYPE apiserver_request_duration_seconds histogram") != std::string::npos);
}

// A newcomer's probe (3,000 unauthenticated GETs of /apis/x/v1/r<random> and
// methods VERB1..3) grew /metrics from 80 KB to 7 MB: labels came from the
// request. They now come from fixed sets.
BOOST_AUTO_TEST_CASE(LabelsComeFromFixedSets) {
  base::MetricsRegistry registry;
  Metrics m(&registry);
  const size_t empty = registry.Render().size();
  m.ObserveRequest("GET", "poolleases", 200, 0.001, false);
  const size_t one = registry.Render().size();
  for (int i = 0; i < 200; ++i) {
    m.ObserveRequest("GET", "r" + std::to_string(i), 401, 0.001, false);
    m.ObserveRequest("VERB" + std::to_string(i), "poolleases", 405, 0.001, false);
    m.WatcherStarted("w" + std::to_string(i));
  }
  const std::string text = registry.Render();
  BOOST_TEST(text.find("resource=\"r1\"") == std::string::npos);
  BOOST_TEST(text.find("VERB") == std::string::npos);
  BOOST_TEST(text.find("apiserver_request_total{code=\"401\",resource=\"\",verb=\"GET\"} 200") !=
             std::string::npos);
  BOOST_TEST(text.find("apiserver_request_total{code=\"405\",resource=\"poolleases\",verb=\"other\"} 200") !=
             std::string::npos);
  BOOST_TEST(text.find("apiserver_registered_watchers{resource=\"\"} 200") != std::string::npos);
  // Three new label sets in all, whatever the number of distinct requests.
  BOOST_TEST(text.size() < one + 4 * (one - empty));
}

BOOST_AUTO_TEST_CASE(ConcurrentCountingLosesNothing) {
  base::MetricsRegistry registry;
  Metrics m(&registry);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m] {
      for (int i = 0; i < 5000; ++i) m.ObserveRequest("LIST", "poolleases", 200, 0.001, false);
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(registry.Render().find("apiserver_request_total{code=\"200\",resource=\"poolleases\",verb=\"LIST\"} 20000") !=
             std::string::npos);
}

// The series a (verb, resource, code) updates are resolved once and kept in
// 8 code slots per (verb, resource): codes past the slots, slots claimed by
// several threads at once, and a second Metrics on another registry each count
// every request in their own series.
BOOST_AUTO_TEST_CASE(ResolvedSeriesCountEveryCode) {
  base::MetricsRegistry registry, other_registry;
  Metrics m(&registry), other(&other_registry);
  constexpr int kCodes = 20, kThreads = 4, kRounds = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < kRounds; ++i) {
        for (int c = 0; c < kCodes; ++c) {
          // Each thread walks the codes in its own order, so slots are raced for.
          const int code = 200 + (c * (t + 1)) % kCodes;
          m.ObserveRequest("PATCH", "delegatedleases", code, 0.001, false);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  other.ObserveRequest("PATCH", "delegatedleases", 200, 0.001, false);
  const std::string text = registry.Render();
  // 4 threads x 300 rounds x 20 codes: t=1 (step 2) and t=3 (step 4) revisit some
  // codes and skip others, so count what each thread sent.
  std::map<int, int> sent;
  for (int t = 0; t < kThreads; ++t) {
    for (int c = 0; c < kCodes; ++c) sent[200 + (c * (t + 1)) % kCodes] += kRounds;
  }
  for (const auto& [code, n] : sent) {
    const std::string line = "apiserver_request_total{code=\"" + std::to_string(code) +
                             "\",resource=\"delegatedleases\",verb=\"PATCH\"} " +
                             std::to_string(n) + "\n";
    BOOST_TEST(text.find(line) != std::string::npos, line);
  }
  BOOST_TEST(text.find("apiserver_request_duration_seconds_count{resource=\"delegatedleases\","
                       "verb=\"PATCH\"} " +
                       std::to_string(kThreads * kRounds * kCodes) + "\n") != std::string::npos);
  BOOST_TEST(other_registry.Render().find(
                 "apiserver_request_total{code=\"200\",resource=\"delegatedleases\",verb=\"PATCH\"} 1\n") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ApiServerTest)

// The whole process in-process: generated PKI, ephemeral port, admin kubeconfig.
BOOST_AUTO_TEST_CASE(StartsWithGeneratedPkiAndShutsDown) {
  std::string tmpl = (fs::temp_directory_path() / "apiserver_test.XXXXXX").string();
  std::string dir = mkdtemp(tmpl.data());
  absl::StatusOr<ServerOptions> o =
      ParseFlags({"--secure-port=0", "--bind-address=127.0.0.1", "--cert-dir=" + dir + "/certs",
                  "--write-kubeconfig=" + dir + "/admin.kubeconfig"});
  BOOST_REQUIRE(o.ok());
  absl::StatusOr<std::unique_ptr<ApiServer>> server = ApiServer::Start(*o);
  BOOST_REQUIRE_MESSAGE(server.ok(), server.status().ToString());
  BOOST_TEST((*server)->port() > 0);
  BOOST_TEST((*server)->kubeconfig_path() == dir + "/admin.kubeconfig");
  absl::StatusOr<std::string> kubeconfig = ReadFileToString(dir + "/admin.kubeconfig");
  BOOST_REQUIRE(kubeconfig.ok());
  BOOST_TEST(kubeconfig->find("server: https://127.0.0.1:" + std::to_string((*server)->port())) !=
             std::string::npos);
  (*server)->Shutdown(std::chrono::seconds(5));
  server->reset();
  fs::remove_all(dir);
}

// A newcomer added a node's user to the admin kubeconfig with `kubectl config
// set-credentials` (kubectl rewrites the file without our header line), and the
// next start failed: such a file is kept as it is, and the server serves.
BOOST_AUTO_TEST_CASE(KeepsAKubeconfigThatKubectlRewroteAndServes) {
  std::string tmpl = (fs::temp_directory_path() / "apiserver_test.XXXXXX").string();
  std::string dir = mkdtemp(tmpl.data());
  const std::string path = dir + "/admin.kubeconfig";
  const std::string edited = "apiVersion: v1\nkind: Config\nusers:\n- name: hz-1\n";
  {
    std::ofstream out(path);
    out << edited;
  }
  absl::StatusOr<ServerOptions> o =
      ParseFlags({"--secure-port=0", "--bind-address=127.0.0.1", "--cert-dir=" + dir + "/certs",
                  "--write-kubeconfig=" + path});
  BOOST_REQUIRE(o.ok());
  absl::StatusOr<std::unique_ptr<ApiServer>> server = ApiServer::Start(*o);
  BOOST_REQUIRE_MESSAGE(server.ok(), server.status().ToString());
  BOOST_TEST((*server)->port() > 0);
  BOOST_TEST((*server)->kubeconfig_path() == path);
  absl::StatusOr<std::string> kept = ReadFileToString(path);
  BOOST_REQUIRE(kept.ok());
  BOOST_TEST(*kept == edited);
  (*server)->Shutdown(std::chrono::seconds(5));
  server->reset();
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
