#include "agent/heartbeat_verifier.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace poolcoord::agent {
namespace {

// A refused certificate is judged again after this long (a certificate that
// was not valid yet may have become valid; membership may have changed).
constexpr int64_t kRefusedForgetMicros = 60'000'000;

DropReason FromCertificateError(CertificateError e) {
  switch (e) {
    case CertificateError::kMalformed: return DropReason::kMalformedCertificate;
    case CertificateError::kUnknownAuthority: return DropReason::kUnknownAuthority;
    case CertificateError::kExpired: return DropReason::kExpiredCertificate;
    case CertificateError::kWrongIdentity: return DropReason::kWrongIdentity;
    case CertificateError::kUnsupportedKey: return DropReason::kUnsupportedKey;
    case CertificateError::kNone: break;
  }
  return DropReason::kMalformedCertificate;
}

}  // namespace

const char* DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kOversized: return "oversized";
    case DropReason::kMalformed: return "malformed";
    case DropReason::kUnsupportedVersion: return "unsupported_version";
    case DropReason::kForeignPool: return "foreign_pool";
    case DropReason::kOwnNode: return "own_node";
    case DropReason::kReplay: return "replay";
    case DropReason::kUnknownCertificate: return "unknown_certificate";
    case DropReason::kMalformedCertificate: return "malformed_certificate";
    case DropReason::kUnknownAuthority: return "unknown_authority";
    case DropReason::kExpiredCertificate: return "expired_certificate";
    case DropReason::kWrongIdentity: return "wrong_identity";
    case DropReason::kUnsupportedKey: return "unsupported_key";
    case DropReason::kBadSignature: return "bad_signature";
    case DropReason::kCount: break;
  }
  return "unknown";
}

HeartbeatVerifier::HeartbeatVerifier(std::shared_ptr<const CertificateAuthority> ca,
                                     const base::Clock* clock, VerifierOptions options)
    : ca_(std::move(ca)),
      clock_(clock),
      options_(options),
      pool_(std::make_shared<const PoolView>()) {}

void HeartbeatVerifier::SetPool(std::shared_ptr<const PoolView> pool) {
  pool_ = std::move(pool);
  std::vector<std::string> gone;
  for (const auto& [node, fps] : by_node_) {
    if (!pool_->IsMember(node) || node == pool_->self) gone.push_back(node);
  }
  for (const std::string& node : gone) Forget(node);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    it = pool_->IsMember(it->first) ? std::next(it) : waiting_.erase(it);
  }
  for (auto it = replay_.begin(); it != replay_.end();) {
    it = pool_->IsMember(it->first) ? std::next(it) : replay_.erase(it);
  }
  for (auto it = last_verified_us_.begin(); it != last_verified_us_.end();) {
    it = pool_->IsMember(it->first) ? std::next(it) : last_verified_us_.erase(it);
  }
  refused_.clear();
  refused_order_.clear();
}

void HeartbeatVerifier::Forget(const std::string& node) {
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return;
  for (const Fingerprint& fp : it->second) by_fingerprint_.erase(fp);
  by_node_.erase(it);
}

HeartbeatVerifier::Result HeartbeatVerifier::Drop(DropReason reason, std::string detail) {
  stats_.dropped[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  Result r;
  r.kind = Result::Kind::kDropped;
  r.reason = reason;
  r.detail = std::move(detail);
  return r;
}

HeartbeatVerifier::Result HeartbeatVerifier::Receive(absl::string_view bytes) {
  return Receive(bytes, clock_->MonotonicMicros(), clock_->NowMicros());
}

HeartbeatVerifier::Result HeartbeatVerifier::Receive(absl::string_view bytes, int64_t arrival_mono_us,
                                                     int64_t arrival_wall_us) {
  auto decoded = DecodeDatagram(bytes);
  if (!decoded.ok()) {
    switch (decoded.status().code()) {
      case absl::StatusCode::kOutOfRange:
        return Drop(DropReason::kOversized, std::string(decoded.status().message()));
      case absl::StatusCode::kUnimplemented:
        return Drop(DropReason::kUnsupportedVersion, std::string(decoded.status().message()));
      default:
        return Drop(DropReason::kMalformed, std::string(decoded.status().message()));
    }
  }
  switch (decoded->type) {
    case DatagramType::kHeartbeat:
      return ReceiveHeartbeat(std::move(decoded->heartbeat), arrival_mono_us, arrival_wall_us,
                              /*may_wait=*/true);
    case DatagramType::kCertificate:
      return ReceiveCertificate(std::move(decoded->certificate_der));
    case DatagramType::kCertificateRequest: {
      const std::string& node = decoded->request.node;
      if (node == pool_->self) return Drop(DropReason::kOwnNode, "a request in our own name");
      if (!pool_->IsMember(node)) {
        return Drop(DropReason::kForeignPool,
                    absl::StrCat("certificate request from ", node, ", not a member of pool ",
                                 pool_->pool));
      }
      stats_.certificate_requests.fetch_add(1, std::memory_order_relaxed);
      Result r;
      r.kind = Result::Kind::kCertificateRequest;
      r.node = node;
      r.fingerprint = decoded->request.fingerprint;
      return r;
    }
  }
  return Drop(DropReason::kMalformed, "unknown type");
}

HeartbeatVerifier::Result HeartbeatVerifier::ReceiveHeartbeat(SignedHeartbeat signed_hb,
                                                              int64_t arrival_mono_us,
                                                              int64_t arrival_wall_us,
                                                              bool may_wait) {
  const Heartbeat& hb = signed_hb.heartbeat;
  if (hb.pool != pool_->pool) {
    return Drop(DropReason::kForeignPool, absl::StrCat("heartbeat of ", hb.node, " for pool ",
                                                       hb.pool, ", ours is ", pool_->pool));
  }
  if (hb.node == pool_->self) return Drop(DropReason::kOwnNode, "a heartbeat in our own name");
  if (!pool_->IsMember(hb.node)) {
    return Drop(DropReason::kForeignPool,
                absl::StrCat(hb.node, " is not a member of pool ", pool_->pool));
  }
  auto window = replay_.find(hb.node);
  if (window != replay_.end() && !window->second.IsNew(hb.boot_id, hb.sequence)) {
    return Drop(DropReason::kReplay, absl::StrCat("heartbeat ", hb.sequence, " of ", hb.node,
                                                  " (boot ", BootIdHex(hb.boot_id),
                                                  ") was seen before or is too old"));
  }
  const int64_t wall = clock_->NowMicros();
  auto cached = by_fingerprint_.find(hb.certificate_fingerprint);
  if (cached == by_fingerprint_.end()) {
    Result r = Drop(DropReason::kUnknownCertificate,
                    absl::StrCat(hb.node, " signs with certificate ",
                                 FingerprintHex(hb.certificate_fingerprint).substr(0, 16),
                                 "..., not received yet"));
    r.node = hb.node;
    r.fingerprint = hb.certificate_fingerprint;
    if (may_wait) {
      Waiting& waiting = waiting_[hb.node];
      waiting.heartbeat = std::move(signed_hb);
      waiting.arrival_mono_us = arrival_mono_us;
      waiting.arrival_wall_us = arrival_wall_us;
    }
    return r;
  }
  if (cached->second.node != hb.node) {
    return Drop(DropReason::kWrongIdentity,
                absl::StrCat("heartbeat of ", hb.node, " signed with the certificate of ",
                             cached->second.node));
  }
  std::shared_ptr<const NodeCertificate> cert = cached->second.certificate;
  if (!options_.cache_verified_certificates) {
    NodeCertificate::Result again = NodeCertificate::Verify(cached->second.der, *ca_, wall);
    if (again.error != CertificateError::kNone) {
      return Drop(FromCertificateError(again.error), again.detail);
    }
    cert = std::move(again.certificate);
  }
  if (!cert->ValidAt(wall)) {
    return Drop(DropReason::kExpiredCertificate,
                absl::StrCat("the certificate of ", hb.node, " is not valid now"));
  }
  if (options_.needed && may_wait && !options_.needed(hb)) {
    auto last = last_verified_us_.find(hb.node);
    if (last != last_verified_us_.end() && arrival_mono_us - last->second < options_.sample_period_us) {
      stats_.heartbeats_heard.fetch_add(1, std::memory_order_relaxed);
      Result r;
      r.kind = Result::Kind::kHeard;
      r.node = hb.node;
      return r;
    }
  }
  const bool signature_ok =
      options_.memo != nullptr
          ? options_.memo->Signature(*cert, signed_hb.signed_bytes, signed_hb.signature)
          : cert->VerifySignature(signed_hb.signed_bytes, signed_hb.signature);
  if (!signature_ok) {
    return Drop(DropReason::kBadSignature,
                absl::StrCat("heartbeat ", hb.sequence, " of ", hb.node, ": bad signature"));
  }
  cached->second.last_used = ++tick_;
  last_verified_us_[hb.node] = arrival_mono_us;
  const bool newest = replay_[hb.node].Accept(hb.boot_id, hb.sequence, tick_);
  stats_.heartbeats_accepted.fetch_add(1, std::memory_order_relaxed);
  auto verified = std::make_shared<VerifiedHeartbeat>();
  verified->signed_heartbeat = std::move(signed_hb);
  verified->certificate = std::move(cert);
  verified->arrival_mono_us = arrival_mono_us;
  verified->arrival_wall_us = arrival_wall_us;
  Result r;
  r.kind = Result::Kind::kHeartbeat;
  r.heartbeat = std::move(verified);
  r.newest = newest;
  r.node = r.heartbeat->heartbeat().node;
  return r;
}

void HeartbeatVerifier::Remember(const Fingerprint& fingerprint, DropReason reason) {
  if (refused_.emplace(fingerprint, reason).second) refused_order_.push_back(fingerprint);
  while (refused_order_.size() > kRefusedMemory) {
    refused_.erase(refused_order_.front());
    refused_order_.pop_front();
  }
}

HeartbeatVerifier::Result HeartbeatVerifier::ReceiveCertificate(std::string der) {
  const Fingerprint fp = CertificateFingerprint(der);
  if (by_fingerprint_.count(fp) != 0) {
    Result r;
    r.kind = Result::Kind::kCertificate;
    r.node = by_fingerprint_[fp].node;
    r.fingerprint = fp;
    return r;
  }
  const int64_t wall = clock_->NowMicros();
  if (refused_last_forget_us_ + kRefusedForgetMicros <= wall || wall < refused_last_forget_us_) {
    refused_.clear();
    refused_order_.clear();
    refused_last_forget_us_ = wall;
  }
  if (auto it = refused_.find(fp); it != refused_.end()) {
    return Drop(it->second, "a certificate refused before");
  }
  NodeCertificate::Result checked = options_.memo != nullptr ? options_.memo->Certificate(der, *ca_, wall)
                                                              : NodeCertificate::Verify(der, *ca_, wall);
  if (checked.error != CertificateError::kNone) {
    const DropReason reason = FromCertificateError(checked.error);
    Remember(fp, reason);
    return Drop(reason, checked.detail);
  }
  const std::string& node = checked.certificate->node();
  if (node == pool_->self) return Drop(DropReason::kOwnNode, "our own certificate");
  if (!pool_->IsMember(node)) {
    Remember(fp, DropReason::kForeignPool);
    return Drop(DropReason::kForeignPool,
                absl::StrCat("certificate of ", node, ", not a member of pool ", pool_->pool));
  }
  std::vector<Fingerprint>& fps = by_node_[node];
  while (fps.size() >= kCertificatesPerNode) {
    auto lru = std::min_element(fps.begin(), fps.end(), [&](const Fingerprint& a, const Fingerprint& b) {
      const CachedCertificate& x = by_fingerprint_[a];
      const CachedCertificate& y = by_fingerprint_[b];
      return std::make_pair(x.last_used, x.added) < std::make_pair(y.last_used, y.added);
    });
    by_fingerprint_.erase(*lru);
    fps.erase(lru);
  }
  fps.push_back(fp);
  CachedCertificate& entry = by_fingerprint_[fp];
  entry.node = node;
  entry.added = ++tick_;
  if (options_.cache_verified_certificates) {
    entry.certificate = std::move(checked.certificate);
  } else {
    entry.der = std::move(der);
  }
  stats_.certificates_accepted.fetch_add(1, std::memory_order_relaxed);
  Result r;
  r.kind = Result::Kind::kCertificate;
  r.node = node;
  r.fingerprint = fp;
  // A heartbeat that waited for this certificate is judged now, with every
  // check, as of its own arrival.
  auto waiting = waiting_.find(node);
  if (waiting != waiting_.end() && waiting->second.heartbeat.heartbeat.certificate_fingerprint == fp) {
    Waiting w = std::move(waiting->second);
    waiting_.erase(waiting);
    Result judged = ReceiveHeartbeat(std::move(w.heartbeat), w.arrival_mono_us, w.arrival_wall_us,
                                     /*may_wait=*/false);
    if (judged.kind == Result::Kind::kHeartbeat) {
      r.heartbeat = std::move(judged.heartbeat);
      r.newest = judged.newest;
    }
  }
  return r;
}

std::shared_ptr<const NodeCertificate> HeartbeatVerifier::Certificate(
    const Fingerprint& fingerprint) const {
  auto it = by_fingerprint_.find(fingerprint);
  return it == by_fingerprint_.end() ? nullptr : it->second.certificate;
}

}  // namespace poolcoord::agent
