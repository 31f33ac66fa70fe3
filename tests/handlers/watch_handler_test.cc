// Watch streams as client-go's reflectors and metadata informers read them, with
// the requests kube-controller-manager 1.32 sent that showed the defects
// (a watch as client-go's reflector sends it, and as kube-controller-manager 1.32
// did).
#define BOOST_TEST_MODULE watch_handler
#include <boost/test/unit_test.hpp>

#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "handlers/list_options.h"
#include "handlers/router.h"
#include "handlers/url.h"
#include "rapidjson/document.h"
#include "store/api_error.h"
#include "store/memory_store.h"
#include "tests/stream_reader.h"

namespace poolcoord::handlers {
namespace {

constexpr char kBase[] = "/apis/coordination.pool/v1alpha1/delegatedleases";
constexpr char kPartialAccept[] = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
// What client-go's reflector sends first when watch-list is on (no resourceVersion).
constexpr char kWatchList[] =
    "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

struct Fixture {
  Fixture() {
    store = store::NewMemoryStore({.watch_history_size = 50});
    RouterOptions opts;
    opts.store = store.get();
    opts.clock = &clock;
    router = NewRouter(opts);
  }

  Response Call(std::string method, std::string target, std::string body = "", std::string accept = "") {
    Request r;
    r.method = std::move(method);
    auto q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = ParseQueryString(target.substr(q + 1));
    if (!body.empty()) r.headers.emplace_back("content-type", "application/json");
    if (!accept.empty()) r.headers.emplace_back("accept", accept);
    r.body = std::move(body);
    r.user.username = "admin";
    r.user.groups = {"system:masters", "system:authenticated"};
    return router->Handle(r);
  }

  std::string Create(const std::string& name) {
    // A valid DelegatedLease (the kind's validation runs with or without lease rules).
    Response r = Call("POST", kBase,
                      "{\"apiVersion\":\"coordination.pool/v1alpha1\",\"kind\":\"DelegatedLease\","
                      "\"metadata\":{\"name\":\"" + name + "\",\"annotations\":"
                      "{\"openyurt.io/delegate-heartbeat\":\"true\"}},\"spec\":{\"holderIdentity\":\"" +
                      name + "\",\"leaseDurationSeconds\":40,\"renewTime\":"
                      "\"2026-01-01T00:00:00.000000Z\",\"poolName\":\"p\"}}");
    BOOST_REQUIRE_MESSAGE(r.status == 201, r.body);
    rapidjson::Document d;
    d.Parse(r.body.c_str());
    return d["metadata"]["resourceVersion"].GetString();
  }

  // The events of a watch that ends by itself (timeoutSeconds=1 in `query`).
  std::vector<rapidjson::Document> Events(const std::string& query, const std::string& accept = "") {
    Response w = Call("GET", std::string(kBase) + query, "", accept);
    BOOST_REQUIRE_MESSAGE(w.stream, "no stream: " << w.status << " " << w.body);
    testing::StreamRead read = testing::ReadStream(*w.stream, std::chrono::seconds(10));
    BOOST_REQUIRE(read.ended);
    std::vector<rapidjson::Document> out;
    size_t start = 0;
    for (size_t nl; (nl = read.body.find('\n', start)) != std::string::npos; start = nl + 1) {
      rapidjson::Document d;
      d.Parse(read.body.substr(start, nl - start).c_str());
      BOOST_REQUIRE_MESSAGE(!d.HasParseError(), "event is not JSON: " << read.body);
      out.push_back(std::move(d));
    }
    return out;
  }

  base::FakeClock clock;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<Router> router;
};

std::string Str(const rapidjson::Value& v, const char* key) {
  return v.HasMember(key) && v[key].IsString() ? v[key].GetString() : "";
}

bool IsInitialEventsEnd(const rapidjson::Document& ev) {
  const auto& md = ev["object"]["metadata"];
  return Str(ev, "type") == "BOOKMARK" && md.HasMember("annotations") &&
         Str(md["annotations"], "k8s.io/initial-events-end") == "true";
}

BOOST_FIXTURE_TEST_SUITE(watch, Fixture)

BOOST_AUTO_TEST_CASE(watch_list_without_resource_version_is_served) {
  // Defect 5: kube-controller-manager's first watch-list got 422 ("resourceVersionMatch
  // is forbidden unless resourceVersion is provided") and fell back to LIST+WATCH.
  auto parsed = ParseListOptions(
      [] {
        Request r;
        r.query = ParseQueryString(std::string(kWatchList).substr(1));
        return r;
      }(),
      store::Kind::kDelegatedLease);
  BOOST_REQUIRE_MESSAGE(parsed.ok(), parsed.status());
  Create("n1");
  const std::string rv = Create("n2");
  for (const std::string& query : {std::string(kWatchList) + "&timeoutSeconds=1",
                                   std::string(kWatchList) + "&timeoutSeconds=1&resourceVersion=" + rv,
                                   std::string(kWatchList) + "&timeoutSeconds=1&resourceVersion=0"}) {
    BOOST_TEST_CONTEXT(query) {
      auto events = Events(query);
      BOOST_REQUIRE(events.size() == 3u);
      BOOST_TEST(Str(events[0], "type") == "ADDED");
      BOOST_TEST(Str(events[0]["object"]["metadata"], "name") == "n1");
      BOOST_TEST(Str(events[1]["object"]["metadata"], "name") == "n2");
      BOOST_TEST(IsInitialEventsEnd(events[2]));
      // The mark carries the revision the state was read at, which the reflector
      // resumes from.
      BOOST_TEST(Str(events[2]["object"]["metadata"], "resourceVersion") == rv);
      BOOST_TEST(Str(events[2]["object"], "kind") == "DelegatedLease");
    }
  }
}

BOOST_AUTO_TEST_CASE(bookmarks_of_a_metadata_watch_are_partial_object_metadata) {
  // Defect 4: with this Accept, ADDED/MODIFIED were PartialObjectMetadata but the
  // BOOKMARK carried kind DelegatedLease, which a metadata informer cannot decode
  // (kube-controller-manager's garbage collector and quota relisted every minute).
  Create("n1");
  auto events = Events(std::string(kWatchList) + "&timeoutSeconds=1", kPartialAccept);
  BOOST_REQUIRE(events.size() == 2u);
  for (const auto& ev : events) {
    BOOST_TEST(Str(ev["object"], "kind") == "PartialObjectMetadata");
    BOOST_TEST(Str(ev["object"], "apiVersion") == "meta.k8s.io/v1");
  }
  BOOST_TEST(IsInitialEventsEnd(events[1]));
  BOOST_TEST(!events[1]["object"].HasMember("spec"));
}

BOOST_AUTO_TEST_CASE(bookmarks_of_a_table_watch_are_tables) {
  Create("n1");
  auto events = Events(std::string(kWatchList) + "&timeoutSeconds=1",
                       "application/json;as=Table;g=meta.k8s.io;v=v1");
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(Str(events[1], "type") == "BOOKMARK");
  BOOST_TEST(Str(events[1]["object"], "kind") == "Table");
  BOOST_TEST(events[1]["object"]["rows"].Size() == 0u);
}

BOOST_AUTO_TEST_CASE(table_cells_of_a_watch_are_computed_when_each_event_is_sent) {
  // A newcomer's `kubectl get pl -w`, then 15 s later `kubectl create` agedemo: the
  // watch printed AGE "<invalid>" (the clock was read once, when the watch began)
  // while `kubectl get` printed its real age.
  Response w = Call("GET", std::string(kBase) + "?watch=1&timeoutSeconds=1", "",
                    "application/json;as=Table;g=meta.k8s.io;v=v1");
  BOOST_REQUIRE_MESSAGE(w.stream, w.status << " " << w.body);
  clock.Advance(std::chrono::seconds(15));
  Create("agedemo");  // created now; renewTime is 2026-01-01T00:00:00Z, the clock's start
  clock.Advance(std::chrono::seconds(2));
  testing::StreamRead read = testing::ReadStream(*w.stream, std::chrono::seconds(10));
  rapidjson::Document ev;
  ev.Parse(read.body.substr(0, read.body.find('\n')).c_str());
  BOOST_REQUIRE_MESSAGE(!ev.HasParseError() && ev.HasMember("object"), read.body);
  const auto& table = ev["object"];
  BOOST_REQUIRE(table["rows"].Size() == 1u);
  const auto& cells = table["rows"][0]["cells"];
  std::map<std::string, std::string> by_column;
  for (rapidjson::SizeType i = 0; i < table["columnDefinitions"].Size(); ++i) {
    if (cells[i].IsString()) by_column[Str(table["columnDefinitions"][i], "name")] = cells[i].GetString();
  }
  BOOST_TEST(by_column["Name"] == "agedemo");
  BOOST_TEST(by_column["Age"] == "2s");
  BOOST_TEST(by_column["Renewed"] == "17s");
}

BOOST_AUTO_TEST_CASE(initial_events_without_bookmarks_have_no_end_mark) {
  // The cacher marks the end only for clients that accept bookmarks.
  Create("n1");
  auto events = Events("?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1");
  BOOST_REQUIRE(events.size() == 1u);
  BOOST_TEST(Str(events[0], "type") == "ADDED");
}

BOOST_AUTO_TEST_CASE(send_initial_events_false_starts_at_the_current_revision) {
  Create("n1");
  Response w = Call("GET", std::string(kBase) +
                               "?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
                               "&timeoutSeconds=1");
  BOOST_REQUIRE(w.stream);
  Create("n2");
  testing::StreamRead read = testing::ReadStream(*w.stream, std::chrono::seconds(10));
  BOOST_TEST(read.body.find("\"n1\"") == std::string::npos);
  BOOST_TEST(read.body.find("\"n2\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(watch_options_validated_as_kube_apiserver_does) {
  struct Case {
    const char* query;
    int code;
    const char* message;  // a part of the Status message
  };
  for (const Case& c : {
           Case{"watch=1&sendInitialEvents=true", 422,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
           Case{"watch=1&sendInitialEvents=false", 422,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
           Case{"watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=1", 422,
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"},
           Case{"watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1", 422,
                // (in the JSON body, the quotes are escaped)
                "Unsupported value: \\\"Exact\\\": supported values: \\\"NotOlderThan\\\""},
           Case{"sendInitialEvents=false", 422, "sendInitialEvents is forbidden for list"},
           Case{"resourceVersionMatch=NotOlderThan", 422,
                "resourceVersionMatch is forbidden unless resourceVersion is provided"},
       }) {
    BOOST_TEST_CONTEXT(c.query) {
      Response r = Call("GET", std::string(kBase) + "?" + c.query);
      BOOST_TEST(r.status == c.code);
      BOOST_TEST(r.body.find(c.message) != std::string::npos, r.body);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
