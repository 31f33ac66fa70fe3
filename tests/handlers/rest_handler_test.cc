#define BOOST_TEST_MODULE rest_handler
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "handlers/list_options.h"
#include "handlers/rest_handler.h"
#include "handlers/router.h"
#include "handlers/url.h"
#include "rapidjson/document.h"
#include "store/memory_store.h"
#include "tests/stream_reader.h"

namespace poolcoord::handlers {
namespace {

// A router over a fresh memory store, without lease rules: these tests cover the
// generic REST semantics; the rules have tests of their own. Its revisions count
// from 1 (a clock 1 µs after the epoch), so 999999 is in its future.
const base::FakeClock kFirstRevisionOne(1);

struct Fixture {
  Fixture() {
    store = store::NewMemoryStore({.watch_history_size = 20, .clock = &kFirstRevisionOne});
    RouterOptions opts;
    opts.store = store.get();
    opts.clock = &clock;
    router = NewRouter(opts);
  }

  Response Call(std::string method, std::string target, std::string body = "",
                std::string content_type = "application/json", std::string accept = "") {
    Request r;
    r.method = std::move(method);
    auto q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = ParseQueryString(target.substr(q + 1));
    if (!body.empty()) r.headers.emplace_back("content-type", content_type);
    if (!accept.empty()) r.headers.emplace_back("accept", accept);
    r.body = std::move(body);
    r.user.username = "admin";
    r.user.groups = {"system:masters", "system:authenticated"};
    return router->Handle(r);
  }

  base::FakeClock clock;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<Router> router;
};

constexpr char kBase[] = "/apis/coordination.pool/v1alpha1/poolleases";

std::string Lease(const std::string& name, int duration = 15, const std::string& extra_meta = "") {
  return "{\"apiVersion\":\"coordination.pool/v1alpha1\",\"kind\":\"PoolLease\",\"metadata\":{\"name\":\"" +
         name + "\"" + extra_meta + "},\"spec\":{\"leaseDurationSeconds\":" + std::to_string(duration) +
         "}}";
}

rapidjson::Document Json(const Response& r) {
  rapidjson::Document d;
  d.Parse(r.body.c_str());
  BOOST_REQUIRE_MESSAGE(!d.HasParseError(), "body is not JSON: " << r.body);
  return d;
}

std::string Reason(const Response& r) {
  auto d = Json(r);
  return d.HasMember("reason") ? d["reason"].GetString() : "";
}

BOOST_FIXTURE_TEST_SUITE(rest, Fixture)

BOOST_AUTO_TEST_CASE(create_sets_server_metadata_and_get_returns_it) {
  Response r = Call("POST", kBase, Lease("a"));
  BOOST_TEST(r.status == 201);
  auto d = Json(r);
  BOOST_TEST(std::string(d["metadata"]["uid"].GetString()).size() == 36u);
  BOOST_TEST(d["metadata"]["generation"].GetInt() == 1);
  BOOST_TEST(std::string(d["metadata"]["creationTimestamp"].GetString()) == "2026-01-01T00:00:00Z");
  Response g = Call("GET", std::string(kBase) + "/a");
  BOOST_TEST(g.status == 200);
  BOOST_TEST(std::string(Json(g)["metadata"]["uid"].GetString()) ==
             std::string(d["metadata"]["uid"].GetString()));
  BOOST_TEST(Call("POST", kBase, Lease("a")).status == 409);
  BOOST_TEST(Reason(Call("POST", kBase, Lease("a"))) == "AlreadyExists");
}

BOOST_AUTO_TEST_CASE(update_checks_resource_version_and_counts_generation) {
  auto created = Json(Call("POST", kBase, Lease("b")));
  std::string rv = created["metadata"]["resourceVersion"].GetString();
  std::string body = Lease("b", 20, ",\"resourceVersion\":\"" + rv + "\"");
  Response u = Call("PUT", std::string(kBase) + "/b", body);
  BOOST_TEST(u.status == 200);
  BOOST_TEST(Json(u)["metadata"]["generation"].GetInt() == 2);
  Response stale = Call("PUT", std::string(kBase) + "/b", body);
  BOOST_TEST(stale.status == 409);
  BOOST_TEST(Reason(stale) == "Conflict");
  Response mismatch = Call("PUT", std::string(kBase) + "/b", Lease("other"));
  BOOST_TEST(mismatch.status == 400);
  BOOST_TEST(Call("PUT", std::string(kBase) + "/missing", Lease("missing")).status == 404);
}

// A PUT says which state it replaces: without metadata.resourceVersion it is
// 422, as kube-apiserver 1.32.6 answers for a coordination.k8s.io Lease and a
// CRD alike (a newcomer's PUT of an edited manifest silently overwrote a write
// it had not read). With a stale one it is 409, with the current one 200.
BOOST_AUTO_TEST_CASE(update_without_resource_version_is_422) {
  const std::string delegated =
      "{\"apiVersion\":\"coordination.pool/v1alpha1\",\"kind\":\"DelegatedLease\",\"metadata\":{"
      "\"name\":\"n\",\"annotations\":{\"openyurt.io/delegate-heartbeat\":\"true\"}},\"spec\":{"
      "\"holderIdentity\":\"n\",\"poolName\":\"p\",\"renewTime\":\"2026-01-01T00:00:00.000000Z\","
      "\"leaseDurationSeconds\":";
  struct Case {
    std::string path;
    std::function<std::string(int)> body;  // leaseDurationSeconds -> body, no resourceVersion
  };
  auto with_rv = [](std::string body, const std::string& rv) {
    body.insert(body.find("\"name\""), "\"resourceVersion\":\"" + rv + "\",");
    return body;
  };
  for (const Case& c : {Case{std::string(kBase) + "/u", [](int d) { return Lease("u", d); }},
                        Case{"/apis/coordination.pool/v1alpha1/delegatedleases/n",
                             [&](int d) { return delegated + std::to_string(d) + "}}"; }}}) {
    BOOST_TEST_CONTEXT(c.path) {
      const std::string collection = c.path.substr(0, c.path.rfind('/'));
      Response created = Call("POST", collection, c.body(15));
      BOOST_REQUIRE_MESSAGE(created.status == 201, created.body);
      const std::string rv = Json(created)["metadata"]["resourceVersion"].GetString();
      // Someone else's write moves the object past what a client read...
      Response other = Call("PATCH", c.path, "{\"spec\":{\"leaseDurationSeconds\":20}}",
                            "application/merge-patch+json");
      BOOST_REQUIRE(other.status == 200);
      const std::string current = Json(other)["metadata"]["resourceVersion"].GetString();
      // ... a PUT without resourceVersion is refused, in kube-apiserver's words ...
      Response blind = Call("PUT", c.path, c.body(30));
      BOOST_TEST(blind.status == 422, blind.body);
      BOOST_TEST(Reason(blind) == "Invalid");
      BOOST_TEST(blind.body.find("metadata.resourceVersion: Invalid value: 0x0: must be specified "
                                 "for an update") != std::string::npos,
                 blind.body);
      BOOST_TEST(Json(Call("GET", c.path))["spec"]["leaseDurationSeconds"].GetInt() == 20);
      // ... the one it read is stale (409), and the current one is taken.
      BOOST_TEST(Call("PUT", c.path, with_rv(c.body(40), rv)).status == 409);
      Response fresh = Call("PUT", c.path, with_rv(c.body(30), current));
      BOOST_TEST(fresh.status == 200, fresh.body);
      BOOST_TEST(Json(fresh)["spec"]["leaseDurationSeconds"].GetInt() == 30);
    }
  }
}

BOOST_AUTO_TEST_CASE(parallel_updates_from_one_read_have_one_winner) {
  auto created = Json(Call("POST", kBase, Lease("race")));
  std::string rv = created["metadata"]["resourceVersion"].GetString();
  std::atomic<int> ok{0}, conflict{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      Response r = Call("PUT", std::string(kBase) + "/race",
                        Lease("race", 20 + i, ",\"resourceVersion\":\"" + rv + "\""));
      (r.status == 200 ? ok : conflict)++;
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(ok.load() == 1);
  BOOST_TEST(conflict.load() == 7);
}

BOOST_AUTO_TEST_CASE(merge_and_json_patch) {
  Call("POST", kBase, Lease("p"));
  Response m = Call("PATCH", std::string(kBase) + "/p", "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}",
                    "application/merge-patch+json");
  BOOST_TEST(m.status == 200);
  BOOST_TEST(std::string(Json(m)["metadata"]["labels"]["a"].GetString()) == "b");
  Response j = Call("PATCH", std::string(kBase) + "/p",
                    "[{\"op\":\"replace\",\"path\":\"/spec/leaseDurationSeconds\",\"value\":33}]",
                    "application/json-patch+json");
  BOOST_TEST(j.status == 200);
  BOOST_TEST(Json(j)["spec"]["leaseDurationSeconds"].GetInt() == 33);
  Response t = Call("PATCH", std::string(kBase) + "/p",
                    "[{\"op\":\"test\",\"path\":\"/spec/leaseDurationSeconds\",\"value\":1}]",
                    "application/json-patch+json");
  BOOST_TEST(t.status == 422);
  BOOST_TEST(Call("PATCH", std::string(kBase) + "/p", "{}", "application/strategic-merge-patch+json")
                 .status == 415);
  Response strict = Call("PATCH", std::string(kBase) + "/p?fieldValidation=Strict",
                         "{\"spec\":{\"nope\":1}}", "application/merge-patch+json");
  // 422 against the field "patch", as kube-apiserver's patcher reports it.
  BOOST_TEST(strict.status == 422);
  BOOST_TEST(strict.body.find("unknown field \\\"spec.nope\\\"") != std::string::npos);
  BOOST_TEST(strict.body.find("\"field\":\"patch\"") != std::string::npos);
  Response warn = Call("PATCH", std::string(kBase) + "/p", "{\"spec\":{\"nope\":1}}",
                       "application/merge-patch+json");
  BOOST_TEST(warn.status == 200);
  bool warned = false;
  for (const auto& [k, v] : warn.headers) warned |= (k == "Warning" && v.find("spec.nope") != std::string::npos);
  BOOST_TEST(warned);
}

BOOST_AUTO_TEST_CASE(list_pages_with_continue_and_selectors) {
  for (int i = 0; i < 5; ++i) {
    Call("POST", kBase, Lease("l" + std::to_string(i), 15,
                              i % 2 ? ",\"labels\":{\"odd\":\"yes\"}" : ""));
  }
  std::vector<std::string> names;
  std::string cont;
  for (int page = 0; page < 10; ++page) {
    Response r = Call("GET", std::string(kBase) + "?limit=2" +
                                 (cont.empty() ? "" : "&continue=" + PercentEncode(cont)));
    BOOST_REQUIRE(r.status == 200);
    auto d = Json(r);
    BOOST_TEST(d["items"].Size() <= 2u);
    for (auto& item : d["items"].GetArray()) names.push_back(item["metadata"]["name"].GetString());
    cont = d["metadata"].HasMember("continue") ? d["metadata"]["continue"].GetString() : "";
    if (cont.empty()) break;
  }
  BOOST_TEST(names == (std::vector<std::string>{"l0", "l1", "l2", "l3", "l4"}));
  auto odd = Json(Call("GET", std::string(kBase) + "?labelSelector=odd%3Dyes"));
  BOOST_TEST(odd["items"].Size() == 2u);
  auto byname = Json(Call("GET", std::string(kBase) + "?fieldSelector=metadata.name%3Dl3"));
  BOOST_TEST(byname["items"].Size() == 1u);
  BOOST_TEST(Call("GET", std::string(kBase) + "?fieldSelector=spec.poolName%3Dx").status == 400);
  BOOST_TEST(Call("GET", std::string(kBase) + "?continue=bogus").status == 400);
}

BOOST_AUTO_TEST_CASE(finalizers_defer_delete_until_removed) {
  Call("POST", kBase, Lease("f", 15, ",\"finalizers\":[\"example.com/x\"]"));
  Response d = Call("DELETE", std::string(kBase) + "/f");
  BOOST_TEST(d.status == 200);
  BOOST_TEST(Json(d)["metadata"].HasMember("deletionTimestamp"));
  BOOST_TEST(Call("GET", std::string(kBase) + "/f").status == 200);
  Response add = Call("PATCH", std::string(kBase) + "/f",
                      "{\"metadata\":{\"finalizers\":[\"example.com/x\",\"example.com/y\"]}}",
                      "application/merge-patch+json");
  BOOST_TEST(add.status == 422);
  Response clear = Call("PATCH", std::string(kBase) + "/f", "{\"metadata\":{\"finalizers\":null}}",
                        "application/merge-patch+json");
  BOOST_TEST(clear.status == 200);
  BOOST_TEST(Call("GET", std::string(kBase) + "/f").status == 404);
}

BOOST_AUTO_TEST_CASE(status_subresource_changes_only_status) {
  Call("POST", kBase, Lease("s"));
  // observedTime is the server's time of the last renewal, on /status too (a
  // newcomer's PATCH .../status of 2099-01-01 was stored).
  Response r = Call("PATCH", std::string(kBase) + "/s/status",
                    "{\"spec\":{\"leaseDurationSeconds\":99},\"status\":{\"expired\":true,"
                    "\"observedTime\":\"2099-01-01T00:00:00.000000Z\"}}",
                    "application/merge-patch+json");
  BOOST_TEST(r.status == 200);
  auto d = Json(r);
  BOOST_TEST(d["spec"]["leaseDurationSeconds"].GetInt() == 15);
  BOOST_TEST(d["status"]["expired"].GetBool());
  BOOST_TEST(!d["status"].HasMember("observedTime"));
  // The main resource ignores status.
  Response m = Call("PATCH", std::string(kBase) + "/s",
                    "{\"status\":{\"expired\":false}}", "application/merge-patch+json");
  BOOST_TEST(Json(m)["status"]["expired"].GetBool());
}

BOOST_AUTO_TEST_CASE(dry_run_and_bad_input) {
  BOOST_TEST(Call("POST", std::string(kBase) + "?dryRun=All", Lease("dry")).status == 201);
  BOOST_TEST(Call("GET", std::string(kBase) + "/dry").status == 404);
  BOOST_TEST(Call("POST", std::string(kBase) + "?dryRun=Sure", Lease("dry")).status == 422);
  BOOST_TEST(Call("POST", kBase, "{oops").status == 400);
  BOOST_TEST(Call("POST", kBase, "[]").status == 400);
  BOOST_TEST(Call("POST", kBase, Lease("Bad_Name")).status == 422);
  BOOST_TEST(Call("POST", kBase, "a: b", "text/plain").status == 415);
  BOOST_TEST(Call("POST", kBase, "a: b", "application/yaml").status == 400);  // no kind
  BOOST_TEST(Call("GET", std::string(kBase) + "/x", "", "", "application/vnd.kubernetes.protobuf").status ==
             406);
  BOOST_TEST(Call("DELETE", std::string(kBase) + "/nothing").status == 404);
  BOOST_TEST(Call("GET", "/apis/coordination.pool/v1alpha1/namespaces/x/poolleases").status == 404);
  BOOST_TEST(Call("PUT", kBase, Lease("x")).status == 405);
}

// A newcomer's probe: GET .../s/foo answered 404 "poolleases/foo... \"s\" not
// found" (as if the object were missing, under a made-up resource), and
// includeObject=bogus was ignored. Then GET .../s/bogus answered
// `poolleases.coordination.pool "s" not found` while s existed. Now every verb
// on an unknown subresource answers as kube-apiserver 1.32 does for
// leases/<name>/bogus: no route, details empty.
BOOST_AUTO_TEST_CASE(unknown_subresource_and_bad_table_options) {
  BOOST_REQUIRE(Call("POST", kBase, Lease("s")).status == 201);
  for (const std::string method : {"GET", "PUT", "PATCH", "POST", "DELETE"}) {
    for (const std::string name : {"s", "missing"}) {
      BOOST_TEST_CONTEXT(method << " " << name) {
        Response sub = Call(method, std::string(kBase) + "/" + name + "/bogus", "{}");
        BOOST_TEST(sub.status == 404);
        BOOST_TEST(std::string(Json(sub)["reason"].GetString()) == "NotFound");
        BOOST_TEST(std::string(Json(sub)["message"].GetString()) ==
                   "the server could not find the requested resource");
        // kube-apiserver writes "details": {}; we leave the empty object out.
        BOOST_TEST(!Json(sub).HasMember("details"));
      }
    }
  }
  BOOST_TEST(Call("GET", std::string(kBase) + "/s").status == 200);  // s is there
  const std::string table = "application/json;as=Table;v=v1;g=meta.k8s.io";
  for (const std::string& target : {std::string(kBase) + "?includeObject=bogus",
                                   std::string(kBase) + "/s?includeObject=bogus",
                                   std::string(kBase) + "?watch=1&includeObject=bogus"}) {
    Response r = Call("GET", target, "", "", table);
    BOOST_TEST_CONTEXT(target) {
      BOOST_TEST(r.status == 400);
      BOOST_TEST(std::string(Json(r)["message"].GetString()) ==
                 "Unable to convert to Table as requested: includeObject: Invalid value: "
                 "\"bogus\": must be 'Metadata', 'Object', 'None', or empty");
    }
  }
  for (const char* ok : {"", "None", "Metadata", "Object"}) {
    BOOST_TEST(Call("GET", std::string(kBase) + "?includeObject=" + ok, "", "", table).status == 200);
  }
  // Without a Table, includeObject means nothing (kube-apiserver ignores it too).
  BOOST_TEST(Call("GET", std::string(kBase) + "?includeObject=bogus").status == 200);
}

// A newcomer's bad-input pass: each of these DELETEs used to delete the object.
BOOST_AUTO_TEST_CASE(malformed_delete_options_are_refused_and_delete_nothing) {
  struct Case {
    std::string query, body, content_type;
    int status;
  };
  const std::vector<Case> cases = {
      {"", "{\"gracePeriodSeconds\":\"x\"}", "application/json", 400},
      {"", "{\"gracePeriodSeconds\":1.5}", "application/json", 400},
      {"", "{\"kind\":\"Pod\",\"apiVersion\":\"v1\"}", "application/json", 400},
      {"", "{\"kind\":5}", "application/json", 400},
      {"", "{\"apiVersion\":[\"meta.k8s.io/v1\"]}", "application/json", 400},
      {"", "{\"orphanDependents\":\"yes\"}", "application/json", 400},
      {"", "{\"dryRun\":\"All\"}", "application/json", 400},
      {"", "{\"preconditions\":{\"uid\":5}}", "application/json", 400},
      {"", "{\"preconditions\":\"x\"}", "application/json", 400},
      {"", "{\"propagationPolicy\":\"Sideways\"}", "application/json", 422},
      {"", "{\"propagationPolicy\":\"Background\",\"orphanDependents\":true}", "application/json", 422},
      {"?gracePeriodSeconds=abc", "", "", 400},
      {"?propagationPolicy=Sideways", "", "", 422},
      {"", "junk", "text/plain", 415},
  };
  Call("POST", kBase, Lease("keep"));
  for (const Case& c : cases) {
    Response r = Call("DELETE", std::string(kBase) + "/keep" + c.query, c.body, c.content_type);
    BOOST_TEST(r.status == c.status, c.query << c.body << " -> " << r.status << " " << r.body);
    BOOST_TEST(Call("GET", std::string(kBase) + "/keep").status == 200, c.query << c.body << " deleted");
  }
  Response r = Call("DELETE", std::string(kBase) + "/keep?propagationPolicy=Sideways");
  BOOST_TEST(Reason(r) == "Invalid");
  BOOST_TEST(r.body.find("DeleteOptions.meta.k8s.io \\\"\\\" is invalid: propagationPolicy: Unsupported value: "
                         "\\\"Sideways\\\"") != std::string::npos,
             r.body);
  r = Call("DELETE", std::string(kBase) + "/keep", "{\"gracePeriodSeconds\":\"x\"}");
  BOOST_TEST(r.body.find("json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds "
                         "of type int64") != std::string::npos,
             r.body);
}

BOOST_AUTO_TEST_CASE(delete_options_kube_accepts_still_delete) {
  // Unknown fields are ignored, and DeleteOptions of any apiVersion decodes (the
  // meta scheme registers it unversioned: per-group DeleteOptions of old clients).
  const std::vector<std::string> bodies = {
      "{\"propagationPolicy\":\"Background\"}",
      "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"meta.k8s.io/v1\",\"gracePeriodSeconds\":0,\"bogus\":1}",
      "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"coordination.pool/v1alpha1\"}",
      "{\"apiVersion\":\"meta.k8s.io/v9\",\"kind\":\"DeleteOptions\"}",
      "{\"gracePeriodSeconds\":null,\"preconditions\":null,\"dryRun\":null}",
  };
  for (size_t i = 0; i < bodies.size(); ++i) {
    const std::string name = "ok" + std::to_string(i);
    Call("POST", kBase, Lease(name));
    Response r = Call("DELETE", std::string(kBase) + "/" + name, bodies[i]);
    BOOST_TEST(r.status == 200, bodies[i] << " -> " << r.body);
  }
  Call("POST", kBase, Lease("q"));
  BOOST_TEST(Call("DELETE", std::string(kBase) + "/q?gracePeriodSeconds=0&propagationPolicy=Foreground").status ==
             200);
}

BOOST_AUTO_TEST_CASE(field_manager_over_128_bytes_is_invalid) {
  const std::string too_long = "?fieldManager=" + std::string(129, 'm');
  Response r = Call("POST", std::string(kBase) + too_long, Lease("fm"));
  BOOST_TEST(r.status == 422);
  BOOST_TEST(Reason(r) == "Invalid");
  BOOST_TEST(r.body.find("CreateOptions.meta.k8s.io \\\"\\\" is invalid: fieldManager: Too long: may not be more "
                         "than 128 bytes") != std::string::npos,
             r.body);
  BOOST_TEST(Call("GET", std::string(kBase) + "/fm").status == 404);
  BOOST_TEST(Call("POST", std::string(kBase) + "?fieldManager=" + std::string(128, 'm'), Lease("fm")).status ==
             201);
  Response got = Call("GET", std::string(kBase) + "/fm");
  BOOST_TEST(Call("PUT", std::string(kBase) + "/fm" + too_long, got.body).status == 422);
  BOOST_TEST(Call("PATCH", std::string(kBase) + "/fm" + too_long, "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}",
                  "application/merge-patch+json")
                 .status == 422);
  BOOST_TEST(Call("POST", std::string(kBase) + "?fieldManager=a%07b", Lease("fm2")).status == 422);
}

// What kube-apiserver 1.32.6 answered a ConfigMap of the same name: the name
// whole in the message twice, in details.name and in the cause (4,194,792
// bytes, pretty-printed).
BOOST_AUTO_TEST_CASE(a_megabyte_name_is_invalid_as_kube_apiserver_answers_it) {
  const std::string name(1 << 20, 'a');
  Response r = Call("POST", kBase, Lease(name));
  BOOST_TEST(r.status == 422);
  auto d = Json(r);
  const std::string quoted = "\"" + name + "\"";
  BOOST_TEST((std::string(d["message"].GetString()) ==
              "PoolLease.coordination.pool " + quoted + " is invalid: metadata.name: Invalid value: " +
                  quoted + ": must be no more than 253 characters"));
  BOOST_TEST((std::string(d["details"]["name"].GetString()) == name));
  BOOST_TEST_REQUIRE(d["details"]["causes"].Size() == 1u);
  BOOST_TEST((std::string(d["details"]["causes"][0]["message"].GetString()) ==
              "Invalid value: " + quoted + ": must be no more than 253 characters"));
  BOOST_TEST(r.body.size() < 4u * name.size() + 1024);
}

// The Warning headers kube-apiserver 1.32.6 sent for a custom resource's
// finalizers without a domain, which kubectl prints as "Warning: ...".
BOOST_AUTO_TEST_CASE(finalizers_without_a_domain_get_kube_apiservers_warning) {
  auto warnings = [](const Response& r) {
    std::vector<std::string> out;
    for (const auto& [k, v] : r.headers) {
      if (k == "Warning") out.push_back(v);
    }
    return out;
  };
  Response created = Call("POST", kBase, Lease("fin", 15, ",\"finalizers\":[\"example.com/ok\",\"cleanup\"]"));
  BOOST_TEST(created.status == 201);
  BOOST_TEST(warnings(created) ==
                 std::vector<std::string>{"299 - \"metadata.finalizers: \\\"cleanup\\\": prefer a "
                                          "domain-qualified finalizer name to avoid accidental conflicts "
                                          "with other finalizer writers\""},
             boost::test_tools::per_element());
  Response patched = Call("PATCH", std::string(kBase) + "/fin",
                          "{\"metadata\":{\"finalizers\":[\"cleanup\",\"pool.example\"]}}",
                          "application/merge-patch+json");
  BOOST_TEST(patched.status == 200);
  BOOST_TEST(warnings(patched) ==
                 std::vector<std::string>{"299 - \"metadata.finalizers: \\\"pool.example\\\": prefer a "
                                          "domain-qualified finalizer name including a path (/) to avoid "
                                          "accidental conflicts with other finalizer writers\""},
             boost::test_tools::per_element());
  Response relabelled = Call("PATCH", std::string(kBase) + "/fin", "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}",
                             "application/merge-patch+json");
  BOOST_TEST(relabelled.status == 200);
  BOOST_TEST(warnings(relabelled).empty());
}

BOOST_AUTO_TEST_CASE(list_resource_version_rules) {
  Call("POST", kBase, Lease("v"));
  BOOST_TEST(Call("GET", std::string(kBase) + "?resourceVersion=999999").status == 504);
  BOOST_TEST(Call("GET", std::string(kBase) + "?resourceVersionMatch=Exact").status == 422);
  BOOST_TEST(Call("GET", std::string(kBase) + "?resourceVersion=0&resourceVersionMatch=Exact").status ==
             422);
  BOOST_TEST(Call("GET", std::string(kBase) + "?resourceVersion=0").status == 200);
}

BOOST_AUTO_TEST_CASE(get_with_a_future_resource_version_is_too_large_as_list_and_watch) {
  // A newcomer's GET .../poolleases/beijing?resourceVersion=999999 answered 200
  // with the current object; list and watch answer 504, as kube-apiserver does.
  auto created = Json(Call("POST", kBase, Lease("beijing")));
  const std::string current = created["metadata"]["resourceVersion"].GetString();
  for (const std::string& path : {std::string(kBase) + "/beijing", std::string(kBase),
                                  std::string(kBase) + "?watch=1"}) {
    BOOST_TEST_CONTEXT(path) {
      Response r = Call("GET", path + (path.find('?') == std::string::npos ? "?" : "&") +
                                   "resourceVersion=999999");
      BOOST_TEST(r.status == 504);
      auto d = Json(r);
      BOOST_TEST(std::string(d["reason"].GetString()) == "Timeout");
      BOOST_TEST(std::string(d["message"].GetString()) ==
                 "Timeout: Too large resource version: 999999, current: " + current);
      BOOST_TEST(std::string(d["details"]["causes"][0]["reason"].GetString()) ==
                 "ResourceVersionTooLarge");
    }
  }
  // The current revision and older ones still read the object.
  BOOST_TEST(Call("GET", std::string(kBase) + "/beijing?resourceVersion=" + current).status == 200);
  BOOST_TEST(Call("GET", std::string(kBase) + "/beijing?resourceVersion=0").status == 200);
}

BOOST_AUTO_TEST_CASE(continue_with_a_resource_version_is_refused_as_kube_apiserver_does) {
  // A newcomer's continue=<token>&resourceVersion=1 answered 200. kube-apiserver
  // 1.32 answers 400 for any resourceVersion but "0" (even a future one), after
  // checking the token itself.
  for (const char* n : {"c1", "c2", "c3"}) Call("POST", kBase, Lease(n));
  const std::string token = Json(Call("GET", std::string(kBase) + "?limit=1"))["metadata"]["continue"].GetString();
  for (const char* rv : {"1", "999999"}) {
    Response r = Call("GET", std::string(kBase) + "?limit=1&continue=" + token + "&resourceVersion=" + rv);
    BOOST_TEST(r.status == 400);
    BOOST_TEST(std::string(Json(r)["message"].GetString()) ==
               "specifying resource version is not allowed when using continue");
  }
  Response garbage = Call("GET", std::string(kBase) + "?limit=1&continue=garbage&resourceVersion=1");
  BOOST_TEST(garbage.status == 400);
  BOOST_TEST(Json(garbage)["message"].GetString() != std::string("specifying resource version is not allowed when using continue"));
  Response zero = Call("GET", std::string(kBase) + "?limit=1&continue=" + token + "&resourceVersion=0");
  BOOST_TEST(zero.status == 200);
  BOOST_TEST(std::string(Json(zero)["items"][0]["metadata"]["name"].GetString()) == "c2");
}

BOOST_AUTO_TEST_CASE(bool_query_parameters_convert_as_kube_apiserver_does) {
  // kube-apiserver's query conversion (runtime.Convert_Slice_string_To_bool)
  // reads only "0" and "false" (any case) as false: watch=yes and watch=maybe
  // start a watch there (checked against kube-apiserver 1.32.6), and here.
  Call("POST", kBase, Lease("b1"));
  for (const char* v : {"yes", "maybe", "TRUE"}) {
    Response w = Call("GET", std::string(kBase) + "?timeoutSeconds=1&watch=" + v);
    BOOST_TEST(static_cast<bool>(w.stream), v);
  }
  for (const char* v : {"0", "false", "False"}) {
    Response l = Call("GET", std::string(kBase) + "?watch=" + v);
    BOOST_TEST(!l.stream, v);
    BOOST_TEST(l.status == 200);
  }
}

BOOST_AUTO_TEST_CASE(gzip_bodies_are_read_as_sent_as_kube_apiserver_reads_them) {
  // A newcomer's POST with Content-Encoding: gzip got 400 "not valid JSON ... at
  // offset 0". kube-apiserver 1.32.6 reads bodies as sent too: 400 for a gzip
  // body (a json parse error at '\x1f'), 201 for plain JSON whatever
  // Content-Encoding says. Here the 400 also names the cause.
  static const char kGzipLease[] =  // gzip of Lease("gz"), mtime 0
      "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\x1d\x8c\x31\x0a\xc3\x30\x10\x04\xff\xb2\xb5\x71\x50\x91\x46\x75\xca\x14\x81\x40\xfa\x43\x3a\x12\x11\xf9\x4e\x48\x8a\x0b\x1b\xfd\x3d\x67\x97\x3b\x3b\xcc\x0e\x2a\xe9\xc5\xb5\x25\x15\x78\x04\xd5\x1a\x93\x50\xb7\x39\x17\xd5\x7c\x59\x1d\xe5\xf2\x21\x87\x09\xdf\x24\xd1\x9c\x87\xe1\x3b\x53\x63\x43\x0b\x77\x8a\xd4\x09\x7e\x87\xd0\xc2\x76\xbf\x37\x8c\x09\xad\x70\x38\x60\x3e\xc4\xdb\xaf\x9e\xc5\x27\x07\x95\xd8\xe0\xdd\x75\x8c\x3f\x1c\xad\x85\x7b\x7a\x00\x00\x00";
  auto post = [this](std::string body) {
    Request r;
    r.method = "POST";
    r.path = kBase;
    r.headers = {{"content-type", "application/json"}, {"content-encoding", "gzip"}};
    r.body = std::move(body);
    r.user.username = "admin";
    r.user.groups = {"system:masters", "system:authenticated"};
    return router->Handle(r);
  };
  Response gz = post(std::string(kGzipLease, sizeof(kGzipLease) - 1));
  BOOST_TEST(gz.status == 400);
  BOOST_TEST(Reason(gz) == "BadRequest");
  BOOST_TEST(std::string(Json(gz)["message"].GetString()).find("gzip-compressed") != std::string::npos,
             gz.body);
  BOOST_TEST(post(Lease("gz")).status == 201);
}

BOOST_AUTO_TEST_CASE(table_and_partial_metadata) {
  Call("POST", kBase, Lease("t"));
  Response t = Call("GET", kBase, "", "",
                    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
  BOOST_TEST(std::string(Json(t)["kind"].GetString()) == "Table");
  Response p = Call("GET", std::string(kBase) + "/t", "", "",
                    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
  BOOST_TEST(std::string(Json(p)["kind"].GetString()) == "PartialObjectMetadata");
}

BOOST_AUTO_TEST_CASE(watch_streams_from_resource_version_and_ends_at_timeout) {
  auto created = Json(Call("POST", kBase, Lease("w1")));
  std::string rv = created["metadata"]["resourceVersion"].GetString();
  Call("POST", kBase, Lease("w2"));
  Response w = Call("GET", std::string(kBase) + "?watch=true&timeoutSeconds=1&resourceVersion=" + rv);
  BOOST_REQUIRE(w.stream);
  testing::StreamRead out = testing::ReadStream(*w.stream, std::chrono::seconds(10));
  BOOST_TEST(out.ended);  // at timeoutSeconds, well before the reader's limit
  BOOST_TEST(out.body.find("\"w2\"") != std::string::npos);
  BOOST_TEST(out.body.find("\"w1\"") == std::string::npos);
  // Too old: more writes than the history keeps.
  for (int i = 0; i < 30; ++i) Call("POST", kBase, Lease("h" + std::to_string(i)));
  Response old = Call("GET", std::string(kBase) + "?watch=true&resourceVersion=" + rv);
  std::string body = old.body;
  if (old.stream) body = testing::ReadStream(*old.stream, std::chrono::seconds(5)).body;
  BOOST_TEST(body.find("\"ERROR\"") != std::string::npos);
  BOOST_TEST(body.find("410") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers
