#define BOOST_TEST_MODULE apply
#include <boost/test/unit_test.hpp>

#include <string>

#include "handlers/apply.h"
#include "handlers/registry/registry.h"
#include "store/api_error.h"

// The scenarios replay what kube-apiserver 1.32 answered for the same requests
// against a CustomResourceDefinition with our schema (entries, conflicts, the
// object after each step).
namespace poolcoord::handlers::ssa {
namespace {

constexpr char kV[] = "coordination.pool/v1alpha1";

// An object and its managers, driven by applies and updates.
class World {
 public:
  explicit World(bool exists = false) {
    if (exists) live_.Parse(R"({"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":{"name":"s1"},"spec":{}})");
    exists_ = exists;
  }

  // Applies `spec` (JSON object text) as `manager`; returns "" or the error message.
  std::string Apply(const std::string& manager, const std::string& spec, bool force = false,
                    const std::string& metadata = R"({"name":"s1"})") {
    rapidjson::Document config;
    const std::string text = R"({"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":)" +
                             metadata + R"(,"spec":)" + spec + "}";
    config.Parse(text.c_str());
    BOOST_REQUIRE(!config.HasParseError());
    BOOST_REQUIRE(handlers::ssa::Validate(config, Root()).ok());
    ApplyOptions o;
    o.schema = &Root();
    o.manager = manager;
    o.api_version = kV;
    o.now_s = ++now_;
    o.force = force;
    rapidjson::Document out;
    auto r = handlers::ssa::Apply(exists_ ? &live_ : nullptr, config, managers_, o, out.GetAllocator());
    if (!r.ok()) {
      last_error_ = r.status();
      return std::string(r.status().message());
    }
    changed_ = r->changed;
    live_.CopyFrom(r->object, live_.GetAllocator());
    managers_ = r->managers;
    exists_ = true;
    return "";
  }

  void Update(const std::string& manager, const std::string& spec) {
    rapidjson::Document next;
    next.CopyFrom(live_, next.GetAllocator());
    rapidjson::Document s;
    s.Parse(spec.c_str());
    next["spec"].CopyFrom(s, next.GetAllocator());
    RecordUpdate(FilterComparison(Compare(&live_, &next, Root()), "", NoResetFields()), manager, kV,
                 "", ++now_, managers_);
    live_.CopyFrom(next, live_.GetAllocator());
  }

  // The spec with keys sorted (a merge keeps the live object's key order).
  std::string Spec() const {
    std::string s = LastAppliedJson(live_["spec"]);
    s.pop_back();
    return s;
  }
  std::string Owned(const std::string& manager) const {
    for (const Manager& m : managers_) {
      if (m.name == manager) return m.fields.ToJson();
    }
    return "<none>";
  }
  bool changed() const { return changed_; }
  const absl::Status& last_error() const { return last_error_; }
  Managers& managers() { return managers_; }
  rapidjson::Document& live() { return live_; }
  static const SchemaNode& Root() { return registry::ForKind(store::Kind::kPoolLease).MergeSchema().root(); }

 private:
  rapidjson::Document live_;
  bool exists_ = false;
  Managers managers_;
  int64_t now_ = 1000;
  bool changed_ = false;
  absl::Status last_error_;
};

constexpr char kBoth[] = R"({"holderIdentity":"a","leaseDurationSeconds":10})";
constexpr char kDurationOnly[] = R"({"leaseDurationSeconds":10})";

BOOST_AUTO_TEST_SUITE(Scenarios)

BOOST_AUTO_TEST_CASE(OwnershipConflictsForceAndRemoval) {
  World w;
  BOOST_TEST(w.Apply("m1", kBoth) == "");
  BOOST_TEST(w.changed());
  BOOST_TEST(w.Owned("m1") == R"({"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{}}})");
  BOOST_TEST(w.managers()[0].time.has_value());

  BOOST_TEST(w.Apply("m1", kBoth) == "");  // the same again: nothing changes
  BOOST_TEST(!w.changed());

  w.Update("m2", R"({"holderIdentity":"b","leaseDurationSeconds":10})");
  BOOST_TEST(w.Owned("m1") == R"({"f:spec":{"f:leaseDurationSeconds":{}}})");
  BOOST_TEST(w.Owned("m2") == R"({"f:spec":{"f:holderIdentity":{}}})");

  BOOST_TEST(w.Apply("m1", kBoth) ==
             "Apply failed with 1 conflict: conflict with \"m2\" using coordination.pool/v1alpha1: "
             ".spec.holderIdentity");
  store::ApiErrorInfo info = store::ApiErrorFromStatus(w.last_error());
  BOOST_TEST(info.code == 409);
  BOOST_TEST(info.reason == "Conflict");
  BOOST_REQUIRE(info.causes.size() == 1u);
  BOOST_TEST(info.causes[0].type == "FieldManagerConflict");
  BOOST_TEST(info.causes[0].message == "conflict with \"m2\" using coordination.pool/v1alpha1");
  BOOST_TEST(info.causes[0].field == ".spec.holderIdentity");
  BOOST_TEST(w.Spec() == R"({"holderIdentity":"b","leaseDurationSeconds":10})");  // untouched

  BOOST_TEST(w.Apply("m1", kBoth, /*force=*/true) == "");
  BOOST_TEST(w.Spec() == R"({"holderIdentity":"a","leaseDurationSeconds":10})");
  BOOST_TEST(w.Owned("m1") == R"({"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{}}})");
  BOOST_TEST(w.Owned("m2") == "<none>");

  // Left out of the configuration and owned by nobody else: removed.
  BOOST_TEST(w.Apply("m1", kDurationOnly) == "");
  BOOST_TEST(w.Spec() == R"({"leaseDurationSeconds":10})");

  // Co-owned: applying the value the object has is no conflict.
  BOOST_TEST(w.Apply("m4", kBoth) == "");
  BOOST_TEST(w.Apply("m1", kBoth) == "");
  BOOST_TEST(w.Owned("m1") == w.Owned("m4"));
  // m1 lets go of the holder, m4 still owns it: it stays.
  BOOST_TEST(w.Apply("m1", kDurationOnly) == "");
  BOOST_TEST(w.Spec() == R"({"holderIdentity":"a","leaseDurationSeconds":10})");
  // m4 lets go of both: the holder goes, the duration stays (m1's).
  BOOST_TEST(w.Apply("m4", R"({"leaseTransitions":1})") == "");
  BOOST_TEST(w.Spec() == R"({"leaseDurationSeconds":10,"leaseTransitions":1})");
  BOOST_TEST(w.Owned("m4") == R"({"f:spec":{"f:leaseTransitions":{}}})");
}

BOOST_AUTO_TEST_CASE(ConflictsWithSeveralManagers) {
  World w;
  BOOST_TEST(w.Apply("m1", R"({"holderIdentity":"a","leaseDurationSeconds":10,"renewTime":"t"})") == "");
  w.Update("u2", R"({"holderIdentity":"b","leaseDurationSeconds":10,"renewTime":"t"})");
  w.Update("u1", R"({"holderIdentity":"b","leaseDurationSeconds":11,"renewTime":"u"})");
  const std::string msg = w.Apply("m9", R"({"holderIdentity":"z","leaseDurationSeconds":12,"renewTime":"v"})");
  // Grouped by manager, sorted by identifier; appliers named without a version.
  BOOST_TEST(msg ==
             "Apply failed with 3 conflicts: conflicts with \"u1\" using coordination.pool/v1alpha1:\n"
             "- .spec.leaseDurationSeconds\n- .spec.renewTime\n"
             "conflicts with \"u2\" using coordination.pool/v1alpha1:\n- .spec.holderIdentity");
  BOOST_TEST(store::ApiErrorFromStatus(w.last_error()).causes.size() == 3u);
}

BOOST_AUTO_TEST_CASE(ApplierConflictNamesNoVersion) {
  World w;
  BOOST_TEST(w.Apply("m1", kBoth) == "");
  BOOST_TEST(w.Apply("m9", R"({"leaseDurationSeconds":20})") ==
             "Apply failed with 1 conflict: conflict with \"m1\": .spec.leaseDurationSeconds");
}

BOOST_AUTO_TEST_CASE(ObjectsWithoutManagersBelongToBeforeFirstApply) {
  World w(/*exists=*/true);
  w.live()["spec"].AddMember("holderIdentity", "b", w.live().GetAllocator());
  BOOST_TEST(w.Apply("m1", R"({"holderIdentity":"zz"})") ==
             "Apply failed with 1 conflict: conflict with \"before-first-apply\" using "
             "coordination.pool/v1alpha1: .spec.holderIdentity");
  BOOST_TEST(w.Apply("m1", R"({"holderIdentity":"b"})") == "");
  BOOST_TEST(w.Owned("before-first-apply") == R"({"f:spec":{".":{},"f:holderIdentity":{}}})");
}

BOOST_AUTO_TEST_CASE(AnEmptySpecIsOwnedItself) {
  World w;
  BOOST_TEST(w.Apply("m1", kBoth) == "");
  BOOST_TEST(w.Apply("m8", "{}") == "");
  // `spec: {}` owns spec itself (as kube-apiserver records it).
  BOOST_TEST(w.Owned("m8") == R"({"f:spec":{}})");
}

BOOST_AUTO_TEST_CASE(KubectlUpgradesFromClientSideApply) {
  // kubectl apply (client-side) made the object: its fields are
  // kubectl-client-side-apply's and its last-applied annotation says hz-1.
  World w;
  const std::string last =
      R"({\"apiVersion\":\"coordination.pool/v1alpha1\",\"kind\":\"PoolLease\",\"metadata\":{\"name\":\"s1\"},\"spec\":{\"holderIdentity\":\"hz-1\",\"leaseDurationSeconds\":15}}\n)";
  const std::string md = R"({"name":"s1","annotations":{"kubectl.kubernetes.io/last-applied-configuration":")" + last + R"("}})";
  BOOST_TEST(w.Apply("csa", R"({"holderIdentity":"hz-1","leaseDurationSeconds":15})", false, md) == "");
  // kubectl apply --server-side with a new holder: no conflict with the fields
  // whose value is still the last-applied one, and the annotation follows.
  BOOST_TEST(w.Apply("kubectl", R"({"holderIdentity":"hz-2","leaseDurationSeconds":15})") == "");
  BOOST_TEST(w.Spec() == R"({"holderIdentity":"hz-2","leaseDurationSeconds":15})");
  const std::string annotation =
      w.live()["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].GetString();
  BOOST_TEST(annotation ==
             "{\"apiVersion\":\"coordination.pool/v1alpha1\",\"kind\":\"PoolLease\",\"metadata\":{\"name\":"
             "\"s1\"},\"spec\":{\"holderIdentity\":\"hz-2\",\"leaseDurationSeconds\":15}}\n");
  // Another manager gets no such pass.
  World v;
  BOOST_TEST(v.Apply("csa", R"({"holderIdentity":"hz-1"})", false, md) == "");
  BOOST_TEST(v.Apply("other", R"({"holderIdentity":"hz-2"})") != "");
}

BOOST_AUTO_TEST_CASE(LastAppliedJsonIsGoJson) {
  rapidjson::Document d;
  d.Parse(R"({"b":1,"a":{"y":"<&>","x":2.5},"c":[true,null,10.0]})");
  BOOST_TEST(LastAppliedJson(d) == "{\"a\":{\"x\":2.5,\"y\":\"\\u003c\\u0026\\u003e\"},\"b\":1,\"c\":[true,null,10]}\n");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::handlers::ssa
