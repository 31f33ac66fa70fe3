#define BOOST_TEST_MODULE codec
#include "cloud/codec.h"

#include <boost/test/unit_test.hpp>
#include <string>

#include "cloud/errors.h"
#include "rapidjson/document.h"

namespace poolcoord::cloud {
namespace {

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  BOOST_REQUIRE(!d.HasParseError());
  return d;
}

// A kubelet's node Lease as kube-apiserver 1.32 returns it.
constexpr char kNodeLease[] = R"({"kind":"Lease","apiVersion":"coordination.k8s.io/v1",
  "metadata":{"name":"hz-1","namespace":"kube-node-lease","uid":"u-1","resourceVersion":"812",
    "creationTimestamp":"2026-01-01T00:00:00Z",
    "ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"hz-1","uid":"n-1"}],
    "managedFields":[{"manager":"kubelet","operation":"Update"}]},
  "spec":{"holderIdentity":"hz-1","leaseDurationSeconds":40,
    "renewTime":"2026-01-01T00:00:10.123456Z"}})";

BOOST_AUTO_TEST_CASE(lease_round_trip_keeps_what_a_put_must_keep) {
  absl::StatusOr<Lease> l = DecodeLease(kNodeLease);
  BOOST_REQUIRE(l.ok());
  BOOST_TEST(l->metadata.resource_version == "812");
  BOOST_TEST(*l->spec.renew_time_us == 1767225610123456);
  BOOST_TEST(!l->spec.acquire_time_us.has_value());
  BOOST_REQUIRE(l->metadata.owner_references.size() == 1u);
  l->metadata.annotations["a"] = "b";
  rapidjson::Document d = Parse(EncodeLease(*l, "coordination.k8s.io/v1", "Lease"));
  BOOST_TEST(std::string(d["metadata"]["ownerReferences"][0]["kind"].GetString()) == "Node");
  BOOST_TEST(std::string(d["metadata"]["ownerReferences"][0]["uid"].GetString()) == "n-1");
  BOOST_TEST(std::string(d["metadata"]["resourceVersion"].GetString()) == "812");
  BOOST_TEST(std::string(d["spec"]["renewTime"].GetString()) == "2026-01-01T00:00:10.123456Z");
  BOOST_TEST(!d["spec"].HasMember("acquireTime"));        // unset stays unset
  BOOST_TEST(!d["metadata"].HasMember("managedFields"));  // left to the server
  BOOST_TEST((*DecodeLease(EncodeLease(*l, "coordination.k8s.io/v1", "Lease")) == *l));
}

// The server dates the renewTime by the managedFields entry that owns it (the
// kubelet's), not by a later write of another manager.
BOOST_AUTO_TEST_CASE(lease_renew_time_dated_by_the_managed_fields_entry_that_owns_it) {
  constexpr char kMarked[] = R"({"kind":"Lease","apiVersion":"coordination.k8s.io/v1",
    "metadata":{"name":"hz-1","namespace":"kube-node-lease","resourceVersion":"900",
      "managedFields":[
        {"manager":"poolcoord","operation":"Update","apiVersion":"coordination.k8s.io/v1",
         "time":"2026-01-01T00:00:30Z","fieldsType":"FieldsV1",
         "fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:coordination.pool/delegated":{}}}}},
        {"manager":"kubelet","operation":"Update","apiVersion":"coordination.k8s.io/v1",
         "time":"2026-01-01T00:00:10Z","fieldsType":"FieldsV1",
         "fieldsV1":{"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{},
                               "f:renewTime":{}}}}]},
    "spec":{"holderIdentity":"hz-1","leaseDurationSeconds":40,
      "renewTime":"2026-01-01T00:00:31.500000Z"}})";
  absl::StatusOr<Lease> l = DecodeLease(kMarked);
  BOOST_REQUIRE(l.ok());
  BOOST_TEST(*l->renew_time_written_us == int64_t{1767225610} * 1'000'000);
  rapidjson::Document d = Parse(EncodeLease(*l, "coordination.k8s.io/v1", "Lease"));
  BOOST_TEST(!d["metadata"].HasMember("managedFields"));  // read only
  BOOST_TEST(!DecodeLease(kNodeLease)->renew_time_written_us.has_value());  // no time, no fields
}

BOOST_AUTO_TEST_CASE(taints_merge_patch_carries_the_precondition) {
  std::vector<Taint> taints = {
      {"node.openyurt.io/unschedulable", "true", "NoSchedule", std::nullopt}};
  BOOST_TEST(
      TaintsMergePatch(taints, "7") ==
      R"({"metadata":{"resourceVersion":"7"},"spec":{"taints":[{"key":"node.openyurt.io/unschedulable","value":"true","effect":"NoSchedule"}]}})");
  BOOST_TEST(TaintsMergePatch({}, "") == R"({"spec":{"taints":[]}})");
}

BOOST_AUTO_TEST_CASE(token_review_escapes_and_reads_the_user) {
  TokenReview r;
  r.token = "a\"b\\c";
  rapidjson::Document d = Parse(EncodeTokenReview(r));
  BOOST_TEST(std::string(d["spec"]["token"].GetString()) == "a\"b\\c");
  BOOST_TEST(!d["spec"].HasMember("audiences"));
  absl::StatusOr<TokenReview> answer =
      DecodeTokenReview(R"({"status":{"authenticated":true,"user":{"username":"alice","uid":"u-1",)"
                        R"("groups":["a","b"],"extra":{"scopes":["x"]}}}})");
  BOOST_REQUIRE(answer.ok());
  BOOST_TEST(answer->authenticated);
  BOOST_TEST(answer->user.username == "alice");
  BOOST_TEST(answer->user.groups.size() == 2u);
  BOOST_TEST(answer->user.extra.at("scopes").front() == "x");
  BOOST_TEST(absl::IsInvalidArgument(DecodeTokenReview("<html>").status()));
}

BOOST_AUTO_TEST_CASE(subject_access_review_spec_in_go_field_order) {
  SubjectAccessReview r;
  r.resource_attributes = ResourceAttributes{
      "", "update", "coordination.pool", "v1alpha1", "delegatedleases", "status", "hz-1"};
  r.user.username = "alice";
  r.user.uid = "u-1";
  r.user.groups = {"g"};
  r.user.extra["k"] = {"v"};
  BOOST_TEST(EncodeSubjectAccessReviewSpec(r) ==
             R"({"resourceAttributes":{"verb":"update","group":"coordination.pool","version":)"
             R"("v1alpha1","resource":"delegatedleases","subresource":"status","name":"hz-1"},)"
             R"("user":"alice","groups":["g"],"extra":{"k":["v"]},"uid":"u-1"})");
  absl::StatusOr<SubjectAccessReview> answer =
      DecodeSubjectAccessReview(R"({"status":{"allowed":false,"denied":true,"reason":"no"}})");
  BOOST_REQUIRE(answer.ok());
  BOOST_TEST(answer->denied);
  BOOST_TEST(answer->reason == "no");
}

BOOST_AUTO_TEST_CASE(watch_events_and_errors) {
  auto ev = DecodeNodeWatchEvent(
      R"({"type":"MODIFIED","object":{"metadata":{"name":"n","resourceVersion":"9",)"
      R"("labels":{"p":"q"}},"spec":{"taints":[{"key":"k","effect":"NoExecute",)"
      R"("timeAdded":"2026-01-01T00:00:00Z"}]}}})");
  BOOST_REQUIRE(ev.ok());
  BOOST_TEST(ev->type == "MODIFIED");
  BOOST_TEST(ev->object.metadata.labels.at("p") == "q");
  BOOST_TEST(*ev->object.taints.at(0).time_added_us == 1767225600000000);
  auto gone = DecodeNodeWatchEvent(
      R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired",)"
      R"j("message":"too old resource version: 1 (5)"}})j");
  BOOST_TEST(cloud::IsResourceExpired(gone.status()));
  BOOST_TEST(std::string(gone.status().message()).find("too old") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(node_addresses) {
  auto n = DecodeNode(
      R"({"metadata":{"name":"hz-1","labels":{"apps.openyurt.io/nodepool":"hangzhou"}},)"
      R"("status":{"addresses":[{"type":"InternalIP","address":"10.0.0.7"},)"
      R"({"type":"Hostname","address":"hz-1"},"junk"]}})");
  BOOST_REQUIRE(n.ok());
  BOOST_REQUIRE_EQUAL(n->addresses.size(), 2u);
  BOOST_TEST(n->addresses[0].type == "InternalIP");
  BOOST_TEST(n->addresses[0].address == "10.0.0.7");
  BOOST_TEST(n->addresses[1].type == "Hostname");
  auto none = DecodeNode(R"({"metadata":{"name":"hz-2"}})");
  BOOST_REQUIRE(none.ok());
  BOOST_TEST(none->addresses.empty());
}

BOOST_AUTO_TEST_CASE(list_query_is_escaped) {
  ListOptions o;
  o.label_selector = "apps.openyurt.io/nodepool";
  o.field_selector = "metadata.name=x";
  o.resource_version = "12";
  o.allow_watch_bookmarks = true;
  o.timeout_seconds = 300;
  BOOST_TEST(ListQuery(o, false) ==
             "?labelSelector=apps.openyurt.io%2Fnodepool&fieldSelector=metadata.name%3Dx&"
             "resourceVersion=12");
  BOOST_TEST(ListQuery(o, true) ==
             "?watch=true&allowWatchBookmarks=true&timeoutSeconds=300&labelSelector="
             "apps.openyurt.io%2Fnodepool&fieldSelector=metadata.name%3Dx&resourceVersion=12");
  BOOST_TEST(ListQuery({}, false).empty());
}

BOOST_AUTO_TEST_CASE(errors_follow_apimachinery) {
  absl::Status conflict = StatusFromResponse(
      409, R"({"kind":"Status","code":409,"reason":"Conflict","message":"modified"})");
  BOOST_TEST(cloud::IsConflict(conflict));
  BOOST_TEST(!cloud::IsAlreadyExists(conflict));
  BOOST_TEST(std::string(conflict.message()) == "HTTP 409 Conflict: modified");
  BOOST_TEST(cloud::IsNotFound(StatusFromResponse(404, "plain text")));  // no Status body: by code
  BOOST_TEST(cloud::IsTooManyRequests(StatusFromResponse(429, "")));
  BOOST_TEST(cloud::IsUnauthorized(StatusFromResponse(401, "")));
  BOOST_TEST(!cloud::IsNotFound(StatusFromResponse(500, "")));
  // Errors made without a Kubernetes answer fall back to the absl code.
  BOOST_TEST(cloud::IsNotFound(absl::NotFoundError("x")));
  BOOST_TEST(cloud::IsConflict(absl::AbortedError("x")));
  BOOST_TEST(ReasonOf(ApiError(403, "Forbidden", "m")) == "Forbidden");
  BOOST_TEST(CodeOf(ApiError(403, "Forbidden", "m")) == 403);
  // The server's message alone, as kubectl prints it.
  BOOST_TEST(MessageOf(conflict) == "modified");
  BOOST_TEST(MessageOf(StatusFromResponse(404, "404 page not found")) == "404 page not found");
  BOOST_TEST(MessageOf(ApiError(403, "Forbidden", "m")) == "m");
  BOOST_TEST(MessageOf(absl::UnavailableError("GET x: refused")) == "GET x: refused");
}

// A DelegatedLease as the server serves it: spec, server-written status, and
// the creationTimestamp (when delegation began).
BOOST_AUTO_TEST_CASE(delegated_lease_and_pool_lease_status) {
  auto d = DecodeDelegatedLease(R"({"kind":"DelegatedLease","apiVersion":"coordination.pool/v1alpha1",
    "metadata":{"name":"hz-3","creationTimestamp":"2026-01-01T00:00:00Z","resourceVersion":"9",
                "annotations":{"openyurt.io/delegate-heartbeat":"true"}},
    "spec":{"holderIdentity":"hz-3","leaseDurationSeconds":40,"renewTime":"2026-01-01T00:00:01.500000Z",
            "poolName":"hangzhou","delegate":"hz-1"},
    "status":{"observedTime":"2026-01-01T00:00:02.000000Z",
              "expired":true,"leaderTerm":{"poolLeaseUID":"u1","leaseTransitions":4}}})");
  BOOST_TEST_REQUIRE(d.ok(), d.status().ToString());
  constexpr int64_t k2026 = 1'767'225'600'000'000;
  BOOST_TEST(*d->metadata.creation_timestamp_us == k2026);
  BOOST_TEST(*d->spec.holder_identity == "hz-3");
  BOOST_TEST(*d->spec.lease_duration_seconds == 40);
  BOOST_TEST(*d->spec.renew_time_us == k2026 + 1'500'000);
  BOOST_TEST(*d->spec.pool_name == "hangzhou");
  BOOST_TEST(*d->spec.delegate == "hz-1");
  BOOST_TEST(*d->status.observed_time_us == k2026 + 2'000'000);
  BOOST_TEST(d->status.expired);
  BOOST_TEST((d->status.leader_term == LeaderTerm{"u1", 4}));
  auto list = DecodeDelegatedLeaseList(R"({"metadata":{"resourceVersion":"12"},"items":[{"metadata":{"name":"a"}}]})");
  BOOST_TEST_REQUIRE(list.ok());
  BOOST_TEST(list->resource_version == "12");
  BOOST_TEST(list->items.size() == 1u);
  BOOST_TEST(!list->items[0].status.leader_term.has_value());

  // A PoolLease's status.observedTime is read; it is never sent back.
  auto pl = DecodeLease(R"({"metadata":{"name":"hangzhou"},"spec":{"holderIdentity":"hz-1"},
                            "status":{"observedTime":"2026-01-01T00:00:02.000000Z"}})");
  BOOST_TEST_REQUIRE(pl.ok());
  BOOST_TEST(*pl->status.observed_time_us == k2026 + 2'000'000);
  BOOST_TEST(EncodeLease(*pl, "coordination.pool/v1alpha1", "PoolLease").find("status") ==
             std::string::npos);
}

}  // namespace
}  // namespace poolcoord::cloud
