// libFuzzer target over the AdmissionReview decoder and the webhook rules:
// arbitrary bytes go through ServeAdmissionReview against a small world (one
// governed pool with a live leader and a DelegatedLease, one ungoverned pool).
// Invariants checked on every input: no crash or sanitizer report; the answer is
// 200, 400 or 413; a 200 is an AdmissionReview echoing apiVersion and uid
// without a patch; a 400 is a metav1.Status; and the answer is byte for byte the
// one of the previous decoder (a full rapidjson DOM, admission_reference.h), so
// the single-pass reader accepts, rejects and reads exactly what the DOM did.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "base/clock.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "handlers/admission_handler.h"
#include "rapidjson/document.h"
#include "store/memory_store.h"
#include "tests/fuzz/admission_reference.h"

namespace pe = poolcoord::election;
namespace ph = poolcoord::handlers;
namespace ps = poolcoord::store;

namespace {

struct World {
  poolcoord::base::FakeClock clock;
  pe::MembershipIndex membership;
  pe::LeaseRules rules{&clock, &membership,
                       {300, "system:serviceaccount:kube-system:poolcoord",
                        {"openyurt:yurt-coordinator:node-lease-proxy-client"}}};
  std::unique_ptr<ps::Store> store = ps::NewMemoryStore({});

  World() {
    clock.Advance(std::chrono::seconds(100));
    membership.Replace("file", {{"hangzhou", {"hz-1", "hz-2", "hz-3"}}, {"beijing", {"bj-1", "bj-2"}}})
        .IgnoreError();
    poolcoord::base::UserInfo leader{"system:node:hz-1", "", {"system:nodes"}, {}};
    ps::Object pl;
    pl.kind = ps::Kind::kPoolLease;
    pl.metadata.name = "hangzhou";
    pl.spec.holder_identity = "hz-1";
    pl.spec.lease_duration_seconds = 300;
    pl.spec.lease_transitions = 0;
    Write(leader, pl);
    ps::Object dl;
    dl.kind = ps::Kind::kDelegatedLease;
    dl.metadata.name = "hz-3";
    dl.metadata.annotations[pe::kDelegateAnnotation] = "true";
    dl.spec.holder_identity = "hz-3";
    dl.spec.lease_duration_seconds = 300;
    dl.spec.renew_time_us = clock.NowMicros();
    dl.spec.pool_name = "hangzhou";
    dl.spec.delegate = "hz-1";
    Write(leader, dl);
  }

  void Write(const poolcoord::base::UserInfo& user, const ps::Object& proposed) {
    auto r = store->Update(proposed.kind, proposed.metadata.name,
                           [&](const ps::ObjectPtr& current, ps::TxnReader& reader)
                               -> absl::StatusOr<ps::MutableObjectPtr> {
                             auto next = std::make_shared<ps::Object>(proposed);
                             next->metadata.uid = "uid-" + proposed.metadata.name;
                             absl::Status s =
                                 next->kind == ps::Kind::kPoolLease
                                     ? rules.AdmitPoolLeaseWrite(user, current, *next)
                                     : rules.AdmitDelegatedLeaseWrite(user, current, *next,
                                                                      reader);
                             if (!s.ok()) return s;
                             return next;
                           });
    if (!r.ok()) std::abort();  // the fixture itself must be valid
  }
};

World& TheWorld() {
  static World* world = new World();
  return *world;
}

void Check(bool cond) {
  if (!cond) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = TheWorld();
  ph::Request req;
  req.method = "POST";
  req.path = ph::kAdmissionPath;
  req.body.assign(reinterpret_cast<const char*>(data), size);
  ph::Response resp = ph::ServeAdmissionReview(req, {w.store.get(), &w.rules});
  Check(resp.status == 200 || resp.status == 400 || resp.status == 413);
  ph::Response ref = ph::reference::ServeAdmissionReview(req, {w.store.get(), &w.rules});
  if (resp.status != ref.status || resp.body != ref.body || resp.headers != ref.headers) {
    std::fprintf(stderr, "differs from the DOM decoder:\n  new %d %s\n  ref %d %s\n", resp.status,
                 resp.body.c_str(), ref.status, ref.body.c_str());
    std::abort();
  }
  rapidjson::Document out;
  out.Parse(resp.body.c_str(), resp.body.size());
  Check(!out.HasParseError() && out.IsObject());
  if (resp.status != 200) {
    Check(out.HasMember("kind") && out["kind"].IsString() &&
          std::string(out["kind"].GetString()) == "Status");
    return 0;
  }
  rapidjson::Document in;
  in.Parse(req.body.c_str(), req.body.size());
  Check(!in.HasParseError());
  Check(std::string(out["apiVersion"].GetString()) == in["apiVersion"].GetString());
  const auto& response = out["response"];
  Check(response.IsObject() && response["allowed"].IsBool());
  Check(!response.HasMember("patch") && !response.HasMember("patchType"));
  const auto& uid = response["uid"];
  Check(uid.IsString() && std::string(uid.GetString(), uid.GetStringLength()) ==
                              std::string(in["request"]["uid"].GetString(),
                                          in["request"]["uid"].GetStringLength()));
  return 0;
}
