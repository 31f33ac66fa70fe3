#include "agent/testing/forging_leader.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "cloud/errors.h"

namespace poolcoord::agent {
namespace {

// A heartbeat in `node`'s name, signed by `identity` (the leader's own key).
std::shared_ptr<const VerifiedHeartbeat> Fabricate(const LeaderView& view,
                                                   const CertificateAuthority& ca,
                                                   const std::string& node, uint64_t sequence) {
  Heartbeat hb;
  hb.node = node;
  hb.pool = view.pool->pool;
  hb.sequence = sequence;
  hb.cloud_reachable = false;
  hb.challenge = view.server_challenge;
  hb.sent_wall_us = view.now_wall_us;
  hb.certificate_fingerprint = view.identity->fingerprint();
  hb.boot_id.fill(0x5a);
  auto body = EncodeHeartbeatBody(hb);
  if (!body.ok()) return nullptr;
  auto signature = view.identity->Sign(*body);
  if (!signature.ok()) return nullptr;
  NodeCertificate::Result certificate =
      NodeCertificate::Verify(view.identity->certificate_der(), ca, view.now_wall_us);
  if (certificate.certificate == nullptr) return nullptr;
  auto out = std::make_shared<VerifiedHeartbeat>();
  out->signed_heartbeat = SignedHeartbeat{hb, *body, *signature};
  out->certificate = std::move(certificate.certificate);
  out->arrival_mono_us = view.now_mono_us;
  out->arrival_wall_us = view.now_wall_us;
  return out;
}

}  // namespace

void ForgingLeader::Step(AgentCloud* cloud, const LeaderView& view) {
  for (const auto& [node, address] : view.pool->members) {
    if (node == view.pool->self) continue;
    auto heard = view.heard.find(node);
    if (heard != view.heard.end() && view.now_mono_us - heard->second < view.freshness.bound_us()) {
      continue;  // alive in the pool: the honest planner decides
    }
    Target& t = targets_[node];
    if (view.now_mono_us < t.next_us) continue;
    t.next_us = view.now_mono_us + period_us_;
    ForgeOne(cloud, view, node, t);
  }
}

void ForgingLeader::ForgeOne(AgentCloud* cloud, const LeaderView& view, const std::string& node,
                             Target& t) {
  DelegatedLeaseWrite w;
  w.node = node;
  w.pool = view.pool->pool;
  w.delegate = view.identity->node();
  w.renew_time_us = std::max(view.now_wall_us, t.last_renew_us + 1);
  w.lease_duration_seconds = view.lease_duration_seconds;
  auto it = view.latest.find(node);
  w.evidence = it != view.latest.end()
                   ? it->second  // replayed
                   : Fabricate(view, *ca_, node, static_cast<uint64_t>(view.now_wall_us));
  if (t.resource_version.empty()) {
    auto rv = cloud->ReadDelegatedLease(node);
    if (rv.ok()) t.resource_version = *rv;
    else if (!absl::IsNotFound(rv.status())) return;
  }
  w.resource_version = t.resource_version;
  stats_.attempts.fetch_add(1);
  auto rv = cloud->WriteDelegatedLease(w);
  if (rv.ok()) {
    stats_.accepted.fetch_add(1);
    t.resource_version = *rv;
    t.last_renew_us = w.renew_time_us;
    base::LogWarning(absl::StrCat("FORGED DelegatedLease ", node, ": accepted (",
                                  it != view.latest.end() ? "replayed" : "fabricated",
                                  " heartbeat)"));
    return;
  }
  t.resource_version.clear();
  if (absl::IsPermissionDenied(rv.status()) && cloud::HasCauseField(rv.status(), "spec.proof")) {
    stats_.refused_proof.fetch_add(1);
  } else {
    stats_.refused_other.fetch_add(1);
  }
  base::LogWarning(absl::StrCat("FORGED DelegatedLease ", node, ": refused: ",
                                cloud::MessageOf(rv.status())));
}

}  // namespace poolcoord::agent
