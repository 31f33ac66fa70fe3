#define BOOST_TEST_MODULE health
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <stdexcept>
#include <string>

#include "handlers/health.h"
#include "tests/handlers/handler_testing.h"

namespace poolcoord::handlers {
namespace {

using testing::HeaderOf;

Request Get(std::string path, std::vector<std::pair<std::string, std::string>> query = {}) {
  return testing::GetRequest(std::move(path), std::move(query));
}

// A check whose answer the test controls, counting its calls.
struct FakeCheck {
  std::atomic<bool> healthy{true};
  std::atomic<int> calls{0};
  HealthCheck Named(std::string name) {
    return {std::move(name), [this] {
              ++calls;
              return healthy.load();
            }};
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(health)

BOOST_AUTO_TEST_CASE(healthy_is_plain_ok) {
  for (const char* endpoint : {"healthz", "livez", "readyz"}) {
    Response r = ServeHealth(Get(std::string("/") + endpoint), endpoint, {});
    BOOST_TEST(r.status == 200);
    BOOST_TEST(r.body == "ok");
    BOOST_TEST(HeaderOf(r, "Content-Type") == "text/plain; charset=utf-8");
  }
}

BOOST_AUTO_TEST_CASE(verbose_lists_ping_first_then_checks) {
  FakeCheck store;
  Response r = ServeHealth(Get("/readyz", {{"verbose", ""}}), "readyz", {store.Named("store")});
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.body == "[+]ping ok\n[+]store ok\nreadyz check passed\n");
  BOOST_TEST(store.calls == 1);
}

BOOST_AUTO_TEST_CASE(own_ping_check_not_duplicated) {
  FakeCheck ping;
  Response r = ServeHealth(Get("/livez", {{"verbose", "1"}}), "livez", {ping.Named("ping")});
  BOOST_TEST(r.body == "[+]ping ok\nlivez check passed\n");
  BOOST_TEST(ping.calls == 1);
}

BOOST_AUTO_TEST_CASE(failure_is_500_with_every_line) {
  FakeCheck store, membership;
  store.healthy = false;
  Response r = ServeHealth(Get("/readyz"), "readyz",
                           {store.Named("store"), membership.Named("membership")});
  BOOST_TEST(r.status == 500);
  BOOST_TEST(r.body ==
             "[+]ping ok\n[-]store failed: reason withheld\n[+]membership ok\n"
             "readyz check failed\n");
  BOOST_TEST(HeaderOf(r, "Content-Type") == "text/plain; charset=utf-8");
}

BOOST_AUTO_TEST_CASE(exclude_skips_checks_and_is_repeatable) {
  FakeCheck store, membership;
  store.healthy = false;
  membership.healthy = false;
  Response r = ServeHealth(Get("/readyz", {{"exclude", "store"}, {"exclude", "membership"}}),
                           "readyz", {store.Named("store"), membership.Named("membership")});
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.body == "ok");
  BOOST_TEST(store.calls == 0);
  BOOST_TEST(membership.calls == 0);

  Response v = ServeHealth(Get("/readyz", {{"exclude", "store"}, {"verbose", ""}}), "readyz",
                           {store.Named("store")});
  BOOST_TEST(v.body == "[+]ping ok\n[+]store excluded: ok\nreadyz check passed\n");
}

BOOST_AUTO_TEST_CASE(exclude_of_unknown_check_warns) {
  Response r = ServeHealth(Get("/healthz", {{"exclude", "nope"}, {"verbose", ""}}), "healthz", {});
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.body ==
             "[+]ping ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\n"
             "healthz check passed\n");
}

BOOST_AUTO_TEST_CASE(single_check_path) {
  FakeCheck store;
  std::vector<HealthCheck> checks{store.Named("store")};
  Response ok = ServeHealth(Get("/readyz/store"), "readyz", checks);
  BOOST_TEST(ok.status == 200);
  BOOST_TEST(ok.body == "ok");
  BOOST_TEST(ServeHealth(Get("/readyz/ping"), "readyz", checks).status == 200);

  store.healthy = false;
  Response failed = ServeHealth(Get("/readyz/store"), "readyz", checks);
  BOOST_TEST(failed.status == 500);
  BOOST_TEST(failed.body == "internal server error: store check failed\n");
  // The failing store check does not affect ping alone.
  BOOST_TEST(ServeHealth(Get("/readyz/ping"), "readyz", checks).status == 200);

  BOOST_TEST(ServeHealth(Get("/readyz/unknown"), "readyz", checks).status == 404);
}

BOOST_AUTO_TEST_CASE(throwing_check_counts_as_failed) {
  std::vector<HealthCheck> checks{
      {"boom", []() -> bool { throw std::runtime_error("boom"); }}};
  Response r = ServeHealth(Get("/livez"), "livez", checks);
  BOOST_TEST(r.status == 500);
  BOOST_TEST(r.body.find("[-]boom failed: reason withheld") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace poolcoord::handlers
