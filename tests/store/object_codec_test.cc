#define BOOST_TEST_MODULE object_codec
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "rapidjson/document.h"
#include "store/api_error.h"
#include "store/object_codec.h"

namespace poolcoord::store {
namespace {

constexpr int64_t k2024Us = 1704067200LL * 1'000'000;

Object FullDelegated() {
  Object o;
  o.kind = Kind::kDelegatedLease;
  o.metadata.name = "node-1";
  o.metadata.generate_name = "gen-";
  o.metadata.uid = "7c1e-uid";
  o.metadata.resource_version = 48213;
  o.metadata.generation = 3;
  o.metadata.creation_timestamp = 1704067200;
  o.metadata.deletion_timestamp = 1704067260;
  o.metadata.deletion_grace_period_seconds = 30;
  o.metadata.labels = {{"coordination.pool/pool", "hangzhou"}};
  o.metadata.annotations = {{"openyurt.io/delegate-heartbeat", "true"}};
  o.metadata.finalizers = {"a/b"};
  o.metadata.owner_references_json =
      R"([{"apiVersion":"v1","kind":"Node","name":"node-1","uid":"a3f9"}])";
  ManagedFieldsEntry mf(ManagedFieldsText{"kubelet", "Update", "coordination.pool/v1alpha1", "FieldsV1",
                                          R"({"f:spec":{"f:renewTime":{}}})", ""},
                        1704067200);
  o.metadata.managed_fields = {mf};
  o.spec.holder_identity = "node-1";
  o.spec.lease_duration_seconds = 40;
  o.spec.renew_time_us = k2024Us + 412339;
  o.spec.pool_name = "hangzhou";
  o.spec.delegate = "node-2";
  o.status.observed_time_us = k2024Us + 5;
  o.status.expired = true;
  o.status.leader_term = LeaderTerm{"pl-uid", 4};
  o.observed_monotonic_us = 123456789;
  return o;
}

rapidjson::Document Parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.c_str());
  BOOST_REQUIRE(!d.HasParseError());
  return d;
}

absl::StatusOr<MutableObjectPtr> DecodeText(const std::string& text, Kind kind,
                                            std::vector<std::string>* unknown = nullptr) {
  return DecodeObjectJson(text, kind, unknown);
}

BOOST_AUTO_TEST_SUITE(Encode)

// A shared (interned) map writes the JSON it keeps; a map of its own goes
// through RapidJSON's writer. Both must give the same bytes, escapes included.
BOOST_AUTO_TEST_CASE(SharedMapsEncodeAsOwnOnes) {
  const std::vector<std::pair<std::string, std::string>> items = {
      {"coordination.pool/pool", "hz"},
      {"test/quote\"back\\slash", "new\nline\ttab\x01\x1F\x7F"},
      {"test/utf8", "h\xC3\xA9 \xF0\x9F\x98\x80"}};
  std::vector<StringMap::value_type> sorted_later;
  for (const auto& [k, v] : items) sorted_later.emplace_back(k, v);
  Object shared = FullDelegated();
  shared.metadata.labels = StringMap::FromUnsorted(std::move(sorted_later));
  BOOST_REQUIRE(shared.metadata.labels.SharedJson() != nullptr);
  Object own = FullDelegated();
  own.metadata.labels.clear();
  for (const auto& [k, v] : items) own.metadata.labels[k] = v;
  BOOST_REQUIRE(own.metadata.labels.SharedJson() == nullptr);
  BOOST_TEST(EncodeObject(shared) == EncodeObject(own));
  BOOST_TEST(EncodeObject(shared).find(R"("test/quote\"back\\slash":"new\nline\ttab\u0001\u001F)") !=
             std::string::npos);
  // Decoded again, the labels are shared and equal.
  auto back = DecodeObjectJson(EncodeObject(own), Kind::kDelegatedLease, nullptr);
  BOOST_REQUIRE(back.ok());
  BOOST_TEST(((*back)->metadata.labels == own.metadata.labels));
  BOOST_TEST((*back)->metadata.labels.SharesItemsWith(shared.metadata.labels));
}

BOOST_AUTO_TEST_CASE(WireShape) {
  Object o = FullDelegated();
  rapidjson::Document d = Parse(EncodeObject(o));
  BOOST_TEST(std::string(d["kind"].GetString()) == "DelegatedLease");
  BOOST_TEST(std::string(d["apiVersion"].GetString()) == "coordination.pool/v1alpha1");
  const auto& md = d["metadata"];
  BOOST_TEST(md["resourceVersion"].IsString());
  BOOST_TEST(std::string(md["resourceVersion"].GetString()) == "48213");
  BOOST_TEST(std::string(md["creationTimestamp"].GetString()) == "2024-01-01T00:00:00Z");
  BOOST_TEST(std::string(md["deletionTimestamp"].GetString()) == "2024-01-01T00:01:00Z");
  BOOST_TEST(md["generation"].GetInt64() == 3);
  BOOST_TEST(std::string(md["ownerReferences"][0]["kind"].GetString()) == "Node");
  BOOST_TEST(std::string(md["managedFields"][0]["manager"].GetString()) == "kubelet");
  // Keys in alphabetical order, as kube-apiserver writes a custom resource.
  const std::string encoded = EncodeObject(o);
  BOOST_TEST(encoded.find(R"("managedFields":[{"apiVersion":"coordination.pool/v1alpha1",)"
                          R"("fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:renewTime":{}}},)"
                          R"("manager":"kubelet","operation":"Update",)"
                          R"("time":"2024-01-01T00:00:00Z"}])") != std::string::npos);
  const auto& spec = d["spec"];
  BOOST_TEST(std::string(spec["renewTime"].GetString()) == "2024-01-01T00:00:00.412339Z");
  BOOST_TEST(spec["leaseDurationSeconds"].GetInt() == 40);
  BOOST_TEST(std::string(spec["delegate"].GetString()) == "node-2");
  const auto& st = d["status"];
  BOOST_TEST(std::string(st["observedTime"].GetString()) == "2024-01-01T00:00:00.000005Z");
  BOOST_TEST(st["expired"].GetBool());
  BOOST_TEST(std::string(st["leaderTerm"]["poolLeaseUID"].GetString()) == "pl-uid");
  BOOST_TEST(st["leaderTerm"]["leaseTransitions"].GetInt() == 4);
  // The server-internal monotonic time never goes to clients.
  BOOST_TEST(EncodeObject(o).find("123456789") == std::string::npos);
  BOOST_TEST(!d.HasMember("poolcoord.internal"));
}

BOOST_AUTO_TEST_CASE(OmitsAbsentAndEmpty) {
  Object o;
  o.kind = Kind::kPoolLease;
  o.metadata.name = "p";
  o.metadata.owner_references_json = "[]";
  rapidjson::Document d = Parse(EncodeObject(o));
  const auto& md = d["metadata"];
  BOOST_TEST(md.MemberCount() == 1u);  // only the name
  BOOST_TEST(d["spec"].ObjectEmpty());
  BOOST_TEST(!d.HasMember("status"));
}

BOOST_AUTO_TEST_CASE(ExpiredOnlyWhenTrue) {
  Object o;
  o.kind = Kind::kDelegatedLease;
  o.status.observed_time_us = k2024Us;
  rapidjson::Document d = Parse(EncodeObject(o));
  BOOST_TEST(d["status"].HasMember("observedTime"));
  BOOST_TEST(!d["status"].HasMember("expired"));
}

BOOST_AUTO_TEST_CASE(SpecFieldsFollowTheKind) {
  Object o;
  o.kind = Kind::kPoolLease;
  o.spec.holder_identity = "hz-1";
  o.spec.acquire_time_us = k2024Us;
  o.spec.lease_transitions = 2;
  o.spec.pool_name = "not-for-poolleases";
  rapidjson::Document d = Parse(EncodeObject(o));
  BOOST_TEST(std::string(d["spec"]["acquireTime"].GetString()) == "2024-01-01T00:00:00.000000Z");
  BOOST_TEST(d["spec"]["leaseTransitions"].GetInt() == 2);
  BOOST_TEST(!d["spec"].HasMember("poolName"));
}

BOOST_AUTO_TEST_CASE(ObjectMetaAlone) {
  ObjectMeta m;
  m.name = "a";
  m.resource_version = 7;
  m.labels = {{"k", "v"}};
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  WriteObjectMeta(w, m);
  BOOST_TEST(std::string(buf.GetString()) ==
             R"({"name":"a","resourceVersion":"7","labels":{"k":"v"}})");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Decode)

BOOST_AUTO_TEST_CASE(RoundTripThroughWire) {
  Object o = FullDelegated();
  auto back = DecodeText(EncodeObject(o), Kind::kDelegatedLease);
  BOOST_REQUIRE(back.ok());
  const Object& b = **back;
  BOOST_TEST(b.metadata.name == "node-1");
  BOOST_TEST(b.metadata.generate_name == "gen-");
  BOOST_TEST(b.metadata.uid == "7c1e-uid");
  BOOST_TEST(b.metadata.resource_version == 48213);
  BOOST_TEST(b.metadata.generation == 3);
  BOOST_TEST(b.metadata.creation_timestamp == 1704067200);
  BOOST_TEST(*b.metadata.deletion_timestamp == 1704067260);
  BOOST_TEST(*b.metadata.deletion_grace_period_seconds == 30);
  BOOST_TEST((b.metadata.labels == o.metadata.labels));
  BOOST_TEST((b.metadata.annotations == o.metadata.annotations));
  BOOST_TEST((b.metadata.finalizers == o.metadata.finalizers));
  BOOST_TEST(b.metadata.owner_references_json == o.metadata.owner_references_json);
  BOOST_TEST((b.metadata.managed_fields == o.metadata.managed_fields));
  // Decoded entries of the same text share one record.
  BOOST_TEST(b.metadata.managed_fields[0].SameText(o.metadata.managed_fields[0]));
  BOOST_TEST(*b.spec.holder_identity == "node-1");
  BOOST_TEST(*b.spec.lease_duration_seconds == 40);
  BOOST_TEST(*b.spec.renew_time_us == k2024Us + 412339);
  BOOST_TEST(*b.spec.pool_name == "hangzhou");
  BOOST_TEST(*b.spec.delegate == "node-2");
  BOOST_TEST(*b.status.observed_time_us == k2024Us + 5);
  BOOST_TEST(b.status.expired);
  BOOST_TEST((b.status.leader_term == LeaderTerm{"pl-uid", 4}));
  BOOST_TEST(b.observed_monotonic_us == 0);  // not on the wire
  BOOST_TEST(EncodeObject(b) == EncodeObject(o));
}

BOOST_AUTO_TEST_CASE(MinimalAndNulls) {
  auto r = DecodeText(
      R"({"metadata":{"name":"p","labels":null,"resourceVersion":""},)"
      R"("spec":{"holderIdentity":null,"leaseDurationSeconds":null,"renewTime":null}})",
      Kind::kPoolLease);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(((*r)->kind == Kind::kPoolLease));
  BOOST_TEST((*r)->metadata.resource_version == 0);
  BOOST_TEST(!(*r)->spec.holder_identity.has_value());
  BOOST_TEST(!(*r)->spec.lease_duration_seconds.has_value());
  BOOST_TEST(!(*r)->spec.renew_time_us.has_value());
  BOOST_TEST((*r)->metadata.labels.empty());
}

void ExpectBadRequest(const std::string& text, const std::string& want_substr,
                      Kind kind = Kind::kPoolLease) {
  auto r = DecodeText(text, kind);
  BOOST_REQUIRE_MESSAGE(!r.ok(), "accepted " << text);
  ApiErrorInfo info = ApiErrorFromStatus(r.status());
  BOOST_TEST(info.code == 400, text);
  BOOST_TEST(info.reason == "BadRequest");
  BOOST_TEST(info.message.find(want_substr) != std::string::npos,
             "message \"" << info.message << "\" lacks \"" << want_substr << "\"");
}

// 400s are what Go's encoding/json refuses in a custom resource's ObjectMeta,
// worded as kube-apiserver words them (ObjectMeta decoded on its own).
BOOST_AUTO_TEST_CASE(BadRequests) {
  ExpectBadRequest("{not json", "json parse error");
  ExpectBadRequest("[1,2]", "cannot unmarshal array");
  ExpectBadRequest(R"({"kind":7})", "cannot unmarshal number into Go struct field PoolLease.kind");
  ExpectBadRequest(R"({"metadata":"x"})", "json: cannot unmarshal string into Go value of type v1.ObjectMeta");
  ExpectBadRequest(R"({"metadata":{"labels":{"a":1}}})",
                   "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string");
  ExpectBadRequest(R"({"metadata":{"finalizers":"a"}})", "Go struct field ObjectMeta.finalizers of type []string");
  ExpectBadRequest(R"({"metadata":{"ownerReferences":{}}})", "ObjectMeta.ownerReferences");
  ExpectBadRequest(R"({"metadata":{"resourceVersion":5}})", "ObjectMeta.resourceVersion");
  ExpectBadRequest(R"({"metadata":{"resourceVersion":"abc"}})", "invalid resourceVersion \"abc\"");
  ExpectBadRequest(R"({"metadata":{"resourceVersion":"-1"}})", "invalid resourceVersion");
}

ApiErrorInfo ExpectInvalid(const std::string& text, Kind kind = Kind::kPoolLease) {
  auto r = DecodeText(text, kind);
  BOOST_REQUIRE_MESSAGE(!r.ok(), "accepted " << text);
  ApiErrorInfo info = ApiErrorFromStatus(r.status());
  BOOST_TEST(info.code == 422, text);
  BOOST_TEST(info.reason == "Invalid");
  return info;
}

// kind or apiVersion not ours: only those, in a 422 of the body's own group and
// kind (kube-apiserver 1.32, a CustomResourceDefinition of our schema:
// `DelegatedLease.x "a9" is invalid: [kind: Invalid value: "DelegatedLease": must
// be PoolLease, apiVersion: ...]`).
BOOST_AUTO_TEST_CASE(TypeMetaNotOursIsInvalidAlone) {
  ApiErrorInfo both = ExpectInvalid(
      R"({"kind":"DelegatedLease","apiVersion":"x/v1","metadata":{"name":"a9"},"spec":{"leaseDurationSeconds":"x"}})");
  BOOST_TEST(both.message ==
             "DelegatedLease.x \"a9\" is invalid: [kind: Invalid value: \"DelegatedLease\": must be "
             "PoolLease, apiVersion: Invalid value: \"x/v1\": must be coordination.pool/v1alpha1]");
  BOOST_TEST(both.group == "x");
  BOOST_TEST(both.kind == "DelegatedLease");
  BOOST_REQUIRE(both.causes.size() == 2u);
  BOOST_TEST(both.causes[0].field == "kind");
  BOOST_TEST(both.causes[1].field == "apiVersion");
  ApiErrorInfo kind = ExpectInvalid(R"({"kind":"PoolLease","metadata":{"name":"n"}})", Kind::kDelegatedLease);
  BOOST_TEST(kind.message ==
             "PoolLease.coordination.pool \"n\" is invalid: kind: Invalid value: \"PoolLease\": must be "
             "DelegatedLease");
  ApiErrorInfo version = ExpectInvalid(R"({"apiVersion":"v1"})");
  BOOST_TEST(version.message ==
             "PoolLease \"\" is invalid: apiVersion: Invalid value: \"v1\": must be coordination.pool/v1alpha1");
  // Absent or empty: not judged here (bodies of create and update are, before).
  BOOST_TEST(DecodeText(R"({"kind":"","apiVersion":null})", Kind::kPoolLease).ok());
}

// What a CustomResourceDefinition's schema refuses is a 422 with one cause per
// field, worded as kube-apiserver 1.32 words each (recorded against a CRD of
// our schema).
BOOST_AUTO_TEST_CASE(SchemaErrorsAreInvalidWithOneCausePerField) {
  struct Case {
    const char* text;
    const char* field;
    const char* type;
    const char* message;
  } cases[] = {
      {R"({"spec":{"leaseDurationSeconds":"x"}})", "spec.leaseDurationSeconds", "FieldValueTypeInvalid",
       R"(Invalid value: "string": spec.leaseDurationSeconds in body must be of type integer: "string")"},
      {R"({"spec":{"leaseTransitions":1.5}})", "spec.leaseTransitions", "FieldValueTypeInvalid",
       R"(Invalid value: "number": spec.leaseTransitions in body must be of type integer: "number")"},
      {R"({"spec":{"leaseTransitions":true}})", "spec.leaseTransitions", "FieldValueTypeInvalid",
       R"(Invalid value: "boolean": spec.leaseTransitions in body must be of type integer: "boolean")"},
      {R"({"spec":{"leaseTransitions":99999999999999999999}})", "spec.leaseTransitions", "FieldValueTypeInvalid",
       R"(Invalid value: "number": spec.leaseTransitions in body must be of type integer: "number")"},
      {R"({"spec":{"holderIdentity":7}})", "spec.holderIdentity", "FieldValueTypeInvalid",
       R"(Invalid value: "integer": spec.holderIdentity in body must be of type string: "integer")"},
      {R"({"spec":{"holderIdentity":3.0}})", "spec.holderIdentity", "FieldValueTypeInvalid",
       R"(Invalid value: "number": spec.holderIdentity in body must be of type string: "number")"},
      {R"({"spec":{"holderIdentity":[1]}})", "spec.holderIdentity", "FieldValueTypeInvalid",
       R"(Invalid value: "array": spec.holderIdentity in body must be of type string: "array")"},
      {R"({"spec":"x"})", "spec", "FieldValueTypeInvalid",
       R"(Invalid value: "string": spec in body must be of type object: "string")"},
      {R"({"spec":{"renewTime":"yesterday"}})", "spec.renewTime", "FieldValueTypeInvalid",
       R"(Invalid value: "yesterday": spec.renewTime in body must be of type date-time: "yesterday")"},
      {R"({"spec":{"acquireTime":5}})", "spec.acquireTime", "FieldValueTypeInvalid",
       R"(Invalid value: "int64": spec.acquireTime in body must be of type date-time: "int64")"},
      {R"({"spec":{"acquireTime":1.5}})", "spec.acquireTime", "FieldValueTypeInvalid",
       R"(Invalid value: "float64": spec.acquireTime in body must be of type date-time: "float64")"},
      {R"({"spec":{"acquireTime":{}}})", "spec.acquireTime", "FieldValueTypeInvalid",
       R"(Invalid value: "": spec.acquireTime in body must be of type date-time: "")"},
      // A CRD stores an array here; a MicroTime cannot hold one.
      {R"({"spec":{"acquireTime":[]}})", "spec.acquireTime", "FieldValueTypeInvalid",
       R"(Invalid value: "array": spec.acquireTime in body must be of type string: "array")"},
      // RFC 3339, but no MicroTime: a CRD stores it, a Go client could not read it back.
      {R"({"spec":{"renewTime":"2024-01-01T00:00:00Z"}})", "spec.renewTime", "FieldValueInvalid",
       R"(Invalid value: "2024-01-01T00:00:00Z": must be a MicroTime: RFC 3339 with exactly 6 fractional digits, e.g. "2024-01-01T00:00:00.000000Z")"},
      // A CRD stores it (format int32 is not enforced); an int32 cannot hold it.
      {R"({"spec":{"leaseDurationSeconds":3000000000}})", "spec.leaseDurationSeconds", "FieldValueInvalid",
       R"(Invalid value: 3000000000: must be a 32-bit integer (format int32))"},
      {R"({"status":{"expired":"yes"}})", "status.expired", "FieldValueTypeInvalid",
       R"(Invalid value: "string": status.expired in body must be of type boolean: "string")"},
      {R"({"status":{"leaderTerm":[]}})", "status.leaderTerm", "FieldValueTypeInvalid",
       R"(Invalid value: "array": status.leaderTerm in body must be of type object: "array")"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.text) {
      ApiErrorInfo info = ExpectInvalid(c.text);
      BOOST_REQUIRE(info.causes.size() == 1u);
      BOOST_TEST(info.causes[0].field == c.field);
      BOOST_TEST(info.causes[0].type == c.type);
      BOOST_TEST(info.causes[0].message == c.message);
    }
  }
  // Integral numbers fill an integer field, as the schema takes them.
  auto integral = DecodeText(R"({"spec":{"leaseDurationSeconds":3.0,"leaseTransitions":1e2}})", Kind::kPoolLease);
  BOOST_REQUIRE(integral.ok());
  BOOST_TEST((*integral)->spec.lease_duration_seconds.value() == 3);
  BOOST_TEST((*integral)->spec.lease_transitions.value() == 100);
}

// The input that showed it: a bad time hid every other field error, and a type
// error hid the bad time. All of them now, in document order, and with the
// field_causes overload the object comes back with those fields unset.
BOOST_AUTO_TEST_CASE(AllFieldErrorsTogether) {
  const std::string text =
      R"({"metadata":{"name":"t2","creationTimestamp":"soon"},"spec":{"leaseDurationSeconds":"x",)"
      R"("holderIdentity":5,"leaseTransitions":1.5,"renewTime":"yesterday","acquireTime":3}})";
  ApiErrorInfo info = ExpectInvalid(text);
  BOOST_TEST(info.name == "t2");
  std::vector<std::string> fields;
  for (const auto& c : info.causes) fields.push_back(c.field);
  const std::vector<std::string> want = {"metadata.creationTimestamp", "spec.leaseDurationSeconds",
                                         "spec.holderIdentity", "spec.leaseTransitions",
                                         "spec.renewTime", "spec.acquireTime"};
  BOOST_TEST(fields == want, boost::test_tools::per_element());

  rapidjson::Document doc;
  doc.Parse(text.c_str(), text.size());
  std::vector<FieldCause> causes;
  auto obj = DecodeObject(doc, Kind::kPoolLease, nullptr, &causes);
  BOOST_REQUIRE(obj.ok());
  BOOST_TEST(causes.size() == want.size());
  BOOST_TEST((*obj)->metadata.name == "t2");
  BOOST_TEST(!(*obj)->spec.lease_duration_seconds.has_value());
  BOOST_TEST(!(*obj)->spec.renew_time_us.has_value());
  // kind/apiVersion not ours still fail alone; encoding/json's 400s still fail.
  std::vector<FieldCause> none;
  rapidjson::Document pod;
  pod.Parse(R"({"kind":"Pod","spec":{"leaseDurationSeconds":"x"}})");
  BOOST_TEST(ApiErrorFromStatus(DecodeObject(pod, Kind::kPoolLease, nullptr, &none).status()).code == 422);
  BOOST_TEST(none.empty());
  rapidjson::Document labels;
  labels.Parse(R"({"metadata":{"labels":{"a":1}},"spec":{"leaseDurationSeconds":"x"}})");
  BOOST_TEST(ApiErrorFromStatus(DecodeObject(labels, Kind::kPoolLease, nullptr, &none).status()).code == 400);
}

BOOST_AUTO_TEST_CASE(UnknownFieldsCollected) {
  const std::string text =
      R"({"kind":"PoolLease","bogus":1,"metadata":{"name":"p","bar":2,"namespace":"default"},)"
      R"("spec":{"holderIdentity":"hz-1","foo":{},"poolName":"x"},)"
      R"("status":{"zzz":true,"leaderTerm":{"poolLeaseUID":"u","extra":1}}})";
  std::vector<std::string> unknown;
  auto r = DecodeText(text, Kind::kPoolLease, &unknown);
  BOOST_REQUIRE(r.ok());
  std::sort(unknown.begin(), unknown.end());
  const std::vector<std::string> want = {"bogus", "metadata.bar", "spec.foo", "spec.poolName",
                                         "status.leaderTerm.extra", "status.zzz"};
  BOOST_TEST(unknown == want, boost::test_tools::per_element());
  BOOST_TEST(*(*r)->spec.holder_identity == "hz-1");
  BOOST_TEST(!(*r)->spec.pool_name.has_value());

  // Without a sink they are silently ignored.
  BOOST_TEST(DecodeText(text, Kind::kPoolLease, nullptr).ok());

  // poolName is a DelegatedLease field; acquireTime is not.
  std::vector<std::string> unknown2;
  auto d = DecodeText(R"({"spec":{"poolName":"hz","acquireTime":"2024-01-01T00:00:00.000000Z"}})",
                      Kind::kDelegatedLease, &unknown2);
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(*(*d)->spec.pool_name == "hz");
  BOOST_REQUIRE(unknown2.size() == 1u);
  BOOST_TEST(unknown2[0] == "spec.acquireTime");
}

BOOST_AUTO_TEST_CASE(LabelsAndAnnotationsSortedLastDuplicateWinsKeysShared) {
  auto r = DecodeText(
      R"({"metadata":{"labels":{"z":"1","coordination.pool/pool":"hz","a":null,"z":"2"},)"
      R"("annotations":{"openyurt.io/delegate-heartbeat":"true"}}})",
      Kind::kDelegatedLease);
  BOOST_REQUIRE(r.ok());
  const StringMap& labels = (*r)->metadata.labels;
  BOOST_REQUIRE(labels.size() == 3u);
  auto it = labels.begin();
  BOOST_TEST(it->first == "a");
  BOOST_TEST(it->second == "");
  ++it;
  BOOST_TEST(it->first == "coordination.pool/pool");
  BOOST_TEST(it->first.interned());
  ++it;
  BOOST_TEST(it->first == "z");
  BOOST_TEST(it->second == "2");
  BOOST_TEST((*r)->metadata.annotations.begin()->first.interned());
  BOOST_TEST(EncodeObject(**r).find(
                 R"("labels":{"a":"","coordination.pool/pool":"hz","z":"2"},)"
                 R"("annotations":{"openyurt.io/delegate-heartbeat":"true"})") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(ManagedFieldsAsSent) {
  // Entries are kept as sent (the field manager judges them); JSON types are
  // checked as encoding/json does, and fieldsV1 becomes compact JSON text.
  auto ok = DecodeText(R"({"metadata":{"name":"a","managedFields":[
      {"manager":"m","operation":"Bogus","fieldsV1":{ "f:spec" : {} },"subresource":"status"},
      {}, null]}})",
                       Kind::kPoolLease);
  BOOST_REQUIRE(ok.ok());
  const auto& mf = (*ok)->metadata.managed_fields;
  BOOST_REQUIRE(mf.size() == 3u);
  BOOST_TEST(mf[0].operation() == "Bogus");
  BOOST_TEST(mf[0].fields_v1() == R"({"f:spec":{}})");
  BOOST_TEST(mf[0].subresource() == "status");
  BOOST_TEST((mf[1] == ManagedFieldsEntry{}));
  BOOST_TEST((mf[2] == ManagedFieldsEntry{}));

  auto bad = DecodeText(R"({"metadata":{"managedFields":[{"manager":5}]}})", Kind::kPoolLease);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(std::string(bad.status().message()) ==
             "json: cannot unmarshal number into Go struct field "
             "ManagedFieldsEntry.managedFields.manager of type string");
  auto not_list = DecodeText(R"({"metadata":{"managedFields":{}}})", Kind::kPoolLease);
  BOOST_REQUIRE(!not_list.ok());
  BOOST_TEST(std::string(not_list.status().message()).find("[]v1.ManagedFieldsEntry") !=
             std::string::npos);

  std::vector<std::string> unknown;
  auto extra = DecodeText(R"({"metadata":{"managedFields":[{"manager":"m","extra":1}]}})",
                          Kind::kPoolLease, &unknown);
  BOOST_REQUIRE(extra.ok());
  BOOST_TEST(unknown == std::vector<std::string>{"metadata.managedFields[0].extra"});
}

BOOST_AUTO_TEST_CASE(LargeAnnotationKept) {
  std::string big(300 * 1024, 'x');
  auto r = DecodeText(R"({"metadata":{"annotations":{"note":")" + big + R"("}}})",
                      Kind::kPoolLease);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST((*r)->metadata.annotations.at("note").size() == big.size());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Storage)

BOOST_AUTO_TEST_CASE(KeepsEveryFieldIncludingMonotonic) {
  Object o = FullDelegated();
  // A field outside the kind's API still survives storage.
  o.spec.acquire_time_us = k2024Us + 77;
  o.spec.lease_transitions = 9;
  std::string stored = EncodeForStorage(o);
  auto back = DecodeFromStorage(stored, Kind::kDelegatedLease);
  BOOST_REQUIRE(back.ok());
  BOOST_TEST((*back)->observed_monotonic_us == 123456789);
  BOOST_TEST(*(*back)->spec.acquire_time_us == k2024Us + 77);
  BOOST_TEST(*(*back)->spec.lease_transitions == 9);
  BOOST_TEST(EncodeForStorage(**back) == stored);
  BOOST_TEST(EncodeObject(**back) == EncodeObject(o));
}

BOOST_AUTO_TEST_CASE(CorruptDataIsInternal) {
  auto r = DecodeFromStorage("{garbage", Kind::kPoolLease);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(ApiErrorFromStatus(r.status()).code == 500);
  auto t = DecodeFromStorage(R"({"poolcoord.internal":{"observedMonotonicUs":"x"}})",
                             Kind::kPoolLease);
  BOOST_TEST(!t.ok());
}

// A kind registered above the store gets the fields and struct names of its row.
BOOST_AUTO_TEST_CASE(RegisteredKindFollowsItsRow) {
  static constexpr ResourceInfo kWidget{Kind{7}, "widgets", "widget", "Widget", "wg",
                                        api::kSpecHolderIdentity | api::kSpecRenewTime, "WidgetSpec",
                                        "WidgetStatus"};
  BOOST_REQUIRE(RegisterResource(&kWidget));
  Object o = FullDelegated();
  o.kind = kWidget.kind;
  rapidjson::Document d = Parse(EncodeObject(o));
  BOOST_TEST(std::string(d["kind"].GetString()) == "Widget");
  BOOST_TEST(d["spec"].MemberCount() == 2u);
  BOOST_TEST(d["spec"].HasMember("holderIdentity"));
  BOOST_TEST(d["spec"].HasMember("renewTime"));
  std::vector<std::string> unknown;
  auto r = DecodeText(R"({"spec":{"holderIdentity":"a","poolName":"p"}})", kWidget.kind, &unknown);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(unknown == std::vector<std::string>{"spec.poolName"}, boost::test_tools::per_element());
  BOOST_TEST(!(*r)->spec.pool_name.has_value());
  auto bad = DecodeText(R"({"spec":{"holderIdentity":5}})", kWidget.kind);
  BOOST_TEST(std::string(bad.status().message()).find("Widget.coordination.pool \"\" is invalid: spec.holderIdentity") !=
             std::string::npos, bad.status().message());
  // Storage keeps every field, whatever the row says.
  auto stored = DecodeFromStorage(EncodeForStorage(o), kWidget.kind);
  BOOST_REQUIRE(stored.ok());
  BOOST_TEST((*stored)->spec.pool_name.value() == "hangzhou");
}

BOOST_AUTO_TEST_SUITE_END()

// Verifiable delegation: spec.proof is read and never written; the
// status parts round-trip on the wire and in storage.
BOOST_AUTO_TEST_SUITE(Delegation)

BOOST_AUTO_TEST_CASE(SpecProofIsReadNeverWritten) {
  std::vector<std::string> unknown;
  auto r = DecodeText(
      R"({"spec":{"holderIdentity":"n1","proof":{"heartbeat":"UENIQg==","certificate":"-----BEGIN","x":1}}})",
      Kind::kDelegatedLease, &unknown);
  BOOST_REQUIRE(r.ok());
  const auto& proof = DelegationOf(**r).proof;
  BOOST_REQUIRE(proof.has_value());
  BOOST_TEST(proof->heartbeat == "UENIQg==");
  BOOST_TEST(proof->certificate == "-----BEGIN");
  BOOST_TEST(unknown == std::vector<std::string>{"spec.proof.x"}, boost::test_tools::per_element());
  BOOST_TEST(EncodeObject(**r).find("proof") == std::string::npos);
  BOOST_TEST(EncodeForStorage(**r).find("proof") == std::string::npos);
  // Not a PoolLease field.
  unknown.clear();
  auto pl = DecodeText(R"({"spec":{"proof":{"heartbeat":"x"}}})", Kind::kPoolLease, &unknown);
  BOOST_REQUIRE(pl.ok());
  BOOST_TEST(!DelegationOf(**pl).proof.has_value());
  BOOST_TEST(unknown == std::vector<std::string>{"spec.proof"}, boost::test_tools::per_element());
  // Wrong JSON types are 422 as the schema words them.
  auto bad = DecodeText(R"({"spec":{"proof":"abc"}})", Kind::kDelegatedLease);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(ApiErrorFromStatus(bad.status()).code == 422);
  BOOST_TEST(std::string(bad.status().message()).find("spec.proof in body must be of type object") !=
             std::string::npos, bad.status().message());
  auto bad2 = DecodeText(R"({"spec":{"proof":{"heartbeat":7}}})", Kind::kDelegatedLease);
  BOOST_REQUIRE(!bad2.ok());
  BOOST_TEST(std::string(bad2.status().message()).find("spec.proof.heartbeat in body must be of type string") !=
             std::string::npos, bad2.status().message());
}

BOOST_AUTO_TEST_CASE(StatusPartsRoundTrip) {
  Object dl = FullDelegated();
  MutableDelegation(dl).accepted_proof =
      AcceptedProof{"00112233445566778899aabbccddeeff", 42, "Y2hhbGxlbmdl"};
  Object pl;
  pl.kind = Kind::kPoolLease;
  pl.metadata.name = "hangzhou";
  MutableDelegation(pl).challenges = {{"bmV3", k2024Us + 9}, {"b2xk", k2024Us + 1}};
  for (const Object* o : {&dl, &pl}) {
    const std::string wire = EncodeObject(*o);
    auto back = DecodeText(wire, o->kind);
    BOOST_REQUIRE(back.ok());
    BOOST_TEST(EncodeObject(**back) == wire);
    BOOST_TEST((DelegationOf(**back).accepted_proof == DelegationOf(*o).accepted_proof));
    BOOST_TEST((DelegationOf(**back).challenges == DelegationOf(*o).challenges));
    auto stored = DecodeFromStorage(EncodeForStorage(*o), o->kind);
    BOOST_REQUIRE(stored.ok());
    BOOST_TEST(EncodeObject(**stored) == wire);
  }
  rapidjson::Document d = Parse(EncodeObject(pl));
  BOOST_TEST(d["status"]["challenges"].Size() == 2u);
  BOOST_TEST(std::string(d["status"]["challenges"][0]["value"].GetString()) == "bmV3");
  BOOST_TEST(std::string(d["status"]["challenges"][0]["issueTime"].GetString()) ==
             "2024-01-01T00:00:00.000009Z");
  rapidjson::Document e = Parse(EncodeObject(dl));
  BOOST_TEST(e["status"]["proof"]["sequence"].GetInt64() == 42);
  BOOST_TEST(std::string(e["status"]["proof"]["bootID"].GetString()) ==
             "00112233445566778899aabbccddeeff");
  // A bad issueTime is one 422 cause, as other times are.
  auto bad = DecodeText(R"({"status":{"challenges":[{"value":"a","issueTime":"yesterday"}]}})",
                        Kind::kPoolLease);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(ApiErrorFromStatus(bad.status()).code == 422);
}

// Copy on write: objects sharing one set of delegation fields never see each
// other's changes; status follows status, spec.proof stays with its object.
BOOST_AUTO_TEST_CASE(CopyOnWriteAndStatusFollowsStatus) {
  Object a;
  MutableDelegation(a).challenges = {{"one", 1}};
  Object b = a;
  BOOST_TEST(a.delegation.get() == b.delegation.get());
  MutableDelegation(b).challenges.push_back({"two", 2});
  BOOST_TEST(DelegationOf(a).challenges.size() == 1u);
  BOOST_TEST(DelegationOf(b).challenges.size() == 2u);

  Object incoming;
  MutableDelegation(incoming).proof = DelegationProof{"hb", "cert"};
  CopyDelegationStatus(incoming, b);
  BOOST_TEST(DelegationOf(incoming).proof.has_value());
  BOOST_TEST(DelegationOf(incoming).challenges.size() == 2u);
  ClearDelegationStatus(incoming);
  BOOST_TEST(DelegationOf(incoming).challenges.empty());
  ClearDelegationProof(incoming);
  BOOST_TEST(!incoming.delegation);  // nothing left: no block held
  Object none;
  CopyDelegationStatus(none, Object{});
  BOOST_TEST(!none.delegation);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::store
