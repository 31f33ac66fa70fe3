#define BOOST_TEST_MODULE list_options
#include <boost/test/unit_test.hpp>

#include "handlers/list_options.h"
#include "handlers/url.h"
#include "store/api_error.h"

namespace poolcoord::handlers {
namespace {

Request WithQuery(const std::string& raw) {
  Request r;
  r.method = "GET";
  r.path = "/apis/coordination.pool/v1alpha1/delegatedleases";
  r.query = ParseQueryString(raw);
  return r;
}

int Code(const absl::Status& s) { return store::ApiErrorFromStatus(s).code; }

BOOST_AUTO_TEST_SUITE(list_options)

BOOST_AUTO_TEST_CASE(parses_watch_parameters_as_client_go_sends_them) {
  auto o = ParseListOptions(
      WithQuery("allowWatchBookmarks=true&fieldSelector=metadata.name%3Dn1&resourceVersion=42"
                "&timeoutSeconds=569&watch=true"),
      store::Kind::kDelegatedLease);
  BOOST_REQUIRE(o.ok());
  BOOST_TEST(o->watch);
  BOOST_TEST(o->allow_watch_bookmarks);
  BOOST_TEST(*o->resource_version == 42);
  BOOST_TEST(*o->timeout_seconds == 569);
  BOOST_TEST(*o->field_selector.ExactName() == "n1");
}

BOOST_AUTO_TEST_CASE(rejects_forbidden_combinations_with_422) {
  for (const char* q : {"resourceVersionMatch=Exact", "resourceVersion=0&resourceVersionMatch=Exact",
                        "resourceVersion=5&resourceVersionMatch=NotOlderThan&continue=x",
                        "resourceVersionMatch=Sometimes&resourceVersion=1",
                        "watch=true&sendInitialEvents=true",
                        "sendInitialEvents=true"}) {
    auto o = ParseListOptions(WithQuery(q), store::Kind::kDelegatedLease);
    BOOST_TEST_CONTEXT(q) {
      BOOST_REQUIRE(!o.ok());
      BOOST_TEST(Code(o.status()) == 422);
    }
  }
  auto ok = ParseListOptions(
      WithQuery("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0"),
      store::Kind::kDelegatedLease);
  BOOST_TEST(ok.ok());
}

BOOST_AUTO_TEST_CASE(rejects_bad_numbers_and_selectors_with_400) {
  for (const char* q : {"limit=x", "limit=-1", "timeoutSeconds=soon", "resourceVersion=abc",
                        "fieldSelector=status.phase%3DRunning", "labelSelector=a+in+(b"}) {
    auto o = ParseListOptions(WithQuery(q), store::Kind::kDelegatedLease);
    BOOST_TEST_CONTEXT(q) {
      BOOST_REQUIRE(!o.ok());
      BOOST_TEST(Code(o.status()) == 400);
    }
  }
}

// Query booleans as kube-apiserver converts them (Convert_Slice_string_To_bool):
// "watch=maybe" was a 400 here and a watch there.
BOOST_AUTO_TEST_CASE(query_booleans_convert_as_kube_apiserver_does) {
  struct Case {
    const char* query;
    bool watch;
  };
  for (const Case& c : {Case{"", false}, Case{"watch=true", true}, Case{"watch=1", true},
                        Case{"watch=maybe", true}, Case{"watch=", true}, Case{"watch=yes", true},
                        Case{"watch=false", false}, Case{"watch=FALSE", false},
                        Case{"watch=False", false}, Case{"watch=0", false},
                        Case{"watch=0&watch=1", false}}) {
    auto o = ParseListOptions(WithQuery(c.query), store::Kind::kDelegatedLease);
    BOOST_TEST_CONTEXT(c.query) {
      BOOST_REQUIRE(o.ok());
      BOOST_TEST(o->watch == c.watch);
    }
  }
  auto bookmarks = ParseListOptions(WithQuery("allowWatchBookmarks=on"), store::Kind::kPoolLease);
  BOOST_REQUIRE(bookmarks.ok());
  BOOST_TEST(bookmarks->allow_watch_bookmarks);
  auto initial = ParseListOptions(WithQuery("watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"),
                                  store::Kind::kPoolLease);
  BOOST_REQUIRE(initial.ok());
  BOOST_TEST((initial->send_initial_events == std::optional<bool>(false)));
  auto absent = ParseListOptions(WithQuery("watch=1"), store::Kind::kPoolLease);
  BOOST_REQUIRE(absent.ok());
  BOOST_TEST(!absent->send_initial_events.has_value());
}

BOOST_AUTO_TEST_CASE(pool_name_field_selector_only_on_delegated_leases) {
  BOOST_TEST(ParseListOptions(WithQuery("fieldSelector=spec.poolName%3Dhz"), store::Kind::kDelegatedLease).ok());
  BOOST_TEST(!ParseListOptions(WithQuery("fieldSelector=spec.poolName%3Dhz"), store::Kind::kPoolLease).ok());
  store::Object o;
  o.kind = store::Kind::kDelegatedLease;
  o.metadata.name = "n";
  o.spec.pool_name = "hz";
  auto sel = ParseListOptions(WithQuery("fieldSelector=spec.poolName%3Dhz"), store::Kind::kDelegatedLease);
  BOOST_TEST(MatchesSelectors(*sel, o));
  o.spec.pool_name = "bj";
  BOOST_TEST(!MatchesSelectors(*sel, o));
}

BOOST_AUTO_TEST_CASE(continue_tokens_round_trip_and_reject_foreign_ones) {
  std::string token = EncodeContinueToken(77, "node-9");
  int64_t rv = 0;
  std::string start;
  BOOST_TEST(DecodeContinueToken(token, &rv, &start).ok());
  BOOST_TEST(rv == 77);
  BOOST_TEST(start == "node-9");
  for (const char* bad : {"", "garbage", "eyJ4IjoxfQ" /* {"x":1} */}) {
    BOOST_TEST_CONTEXT(bad) { BOOST_TEST(Code(DecodeContinueToken(bad, &rv, &start)) == 400); }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
