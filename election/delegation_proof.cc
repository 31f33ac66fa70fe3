#include "election/delegation_proof.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/quote.h"
#include "base/string_view.h"
#include "election/heartbeat.h"
#include "store/api_error.h"

namespace poolcoord::election {
namespace {

constexpr char kKind[] = "DelegatedLease";
constexpr char kResource[] = "delegatedleases";
constexpr size_t kChallengeBytes = 32;
// Pools remembered by the challenge book; past this it starts over (a pool's
// challenges are then first seen again: ages judged by their issue times).
constexpr size_t kMaxPools = 100'000;

std::string Seconds(int64_t micros) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(micros) / 1e6);
  return buf;
}

std::string DurationText(absl::Duration d) { return absl::FormatDuration(d); }

// The one certificate of a PEM text, as DER. InvalidArgument otherwise.
absl::StatusOr<std::string> PemToDer(absl::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  X509* second = cert ? PEM_read_bio_X509(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  ERR_clear_error();
  if (second != nullptr) {
    X509_free(second);
    X509_free(cert);
    return absl::InvalidArgumentError(
        "holds more than one certificate; send the node's certificate alone");
  }
  if (cert == nullptr) return absl::InvalidArgumentError("is not a PEM certificate");
  unsigned char* der = nullptr;
  const int len = i2d_X509(cert, &der);
  X509_free(cert);
  if (len <= 0) return absl::InvalidArgumentError("is not a PEM certificate");
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

const char* CertificateRule(CertificateError error) {
  switch (error) {
    case CertificateError::kUnknownAuthority: return "unknown_authority";
    case CertificateError::kExpired: return "expired_certificate";
    case CertificateError::kWrongIdentity: return "wrong_identity";
    case CertificateError::kUnsupportedKey: return "unsupported_key";
    case CertificateError::kMalformed: return "malformed";
    case CertificateError::kNone: return "none";
  }
  return "unknown";
}

}  // namespace

absl::StatusOr<ProofMode> ParseProofMode(absl::string_view text) {
  if (text == "required") return ProofMode::kRequired;
  if (text == "optional") return ProofMode::kOptional;
  if (text == "off") return ProofMode::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("--delegation-proof: ", base::GoQuote(std::string(text)),
                   " is not one of required, optional, off"));
}

const char* ProofModeName(ProofMode mode) {
  switch (mode) {
    case ProofMode::kOff: return "off";
    case ProofMode::kOptional: return "optional";
    case ProofMode::kRequired: return "required";
  }
  return "unknown";
}

size_t DelegationProofOptions::ChallengesKept() const {
  if (challenge_period <= absl::ZeroDuration()) return 2;
  const int64_t periods = absl::ToInt64Microseconds(max_age) /
                              absl::ToInt64Microseconds(challenge_period) +
                          (absl::ToInt64Microseconds(max_age) %
                                       absl::ToInt64Microseconds(challenge_period) !=
                                   0
                               ? 1
                               : 0);
  return static_cast<size_t>(std::clamp<int64_t>(periods + 1, 2, 64));
}

absl::Status DelegationProofOptions::Validate() const {
  if (challenge_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--delegation-challenge-period must be positive");
  }
  if (max_age <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--delegation-proof-max-age must be positive");
  }
  return absl::OkStatus();
}

DelegationProofs::DelegationProofs(const base::Clock* clock, DelegationProofOptions options,
                                   base::MetricsRegistry* metrics)
    : clock_(clock), options_(std::move(options)) {
  if (metrics == nullptr) {
    own_metrics_ = std::make_unique<base::MetricsRegistry>();
    metrics = own_metrics_.get();
  }
  proofs_ = &metrics->AddCounter(
      "poolcoord_delegation_proofs_total",
      "Delegation proofs checked on DelegatedLease writes, by result: accepted, or the rule "
      "that refused the proof (docs/verifiable-delegation.md).",
      {"result"});
  unproven_ = &metrics
                   ->AddCounter("poolcoord_delegation_unproven_writes_total",
                                "DelegatedLease writes by a pool leader without a delegation "
                                "proof, let through by --delegation-proof=optional.")
                   .WithLabels({});
  auto& checks = metrics->AddCounter(
      "poolcoord_delegation_signature_checks_total",
      "Signature verifications of delegation proofs, by phase: before_step (off the store's "
      "lock, before a write's atomic step) or in_step (inside it: a write the API did not "
      "precheck, or whose precheck failed).",
      {"phase"});
  checks_before_step_ = &checks.WithLabels({"before_step"});
  checks_in_step_ = &checks.WithLabels({"in_step"});
  issued_ = &metrics
                 ->AddCounter("poolcoord_delegation_challenges_issued_total",
                              "Delegation challenges this replica issued to pools.")
                 .WithLabels({});
}

absl::Status DelegationProofs::SetClientCaPem(absl::string_view pem) {
  std::shared_ptr<const CertificateAuthority> ca;
  if (!absl::StripAsciiWhitespace(pem).empty()) {
    auto parsed = CertificateAuthority::FromPem(pem);
    if (!parsed.ok()) return parsed.status();
    ca = *std::move(parsed);
  }
  SetClientCa(std::move(ca));
  return absl::OkStatus();
}

void DelegationProofs::SetClientCa(std::shared_ptr<const CertificateAuthority> ca) {
  absl::MutexLock lock(&ca_mu_);
  ca_ = std::move(ca);
  ++ca_generation_;
  certificates_.clear();
}

// ---------------------------------------------------------------- challenges

std::string DelegationProofs::NewChallengeValue() {
  unsigned char bytes[kChallengeBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // OpenSSL's DRBG failing is not recoverable here; a predictable challenge
    // would defeat the protocol, so refuse to go on.
    std::abort();
  }
  return absl::Base64Escape(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
}

int64_t DelegationProofs::FirstSight(absl::string_view pool, absl::string_view value) {
  if (seen_.size() >= kMaxPools && !seen_.contains(pool)) seen_.clear();
  std::vector<Seen>& list = seen_[pool];
  for (const Seen& s : list) {
    if (s.value == value) return s.first_sight_mono_us;
  }
  const int64_t now = clock_->MonotonicMicros();
  list.push_back(Seen{std::string(value), now});
  // The pool's listed challenges plus as many retired ones (for the
  // stale_challenge message): the oldest sights go first.
  const size_t keep = 2 * options_.ChallengesKept();
  if (list.size() > keep) list.erase(list.begin(), list.begin() + (list.size() - keep));
  return now;
}

void DelegationProofs::ObserveLocked(absl::string_view pool,
                                     const std::vector<store::DelegationChallenge>& list) {
  // Oldest first, so first sights keep the list's order.
  for (auto it = list.rbegin(); it != list.rend(); ++it) FirstSight(pool, it->value);
}

void DelegationProofs::Observe(const store::Object& pool_lease) {
  const auto& list = store::DelegationOf(pool_lease).challenges;
  if (list.empty()) return;
  absl::MutexLock lock(&mu_);
  ObserveLocked(pool_lease.metadata.name, list);
}

int64_t DelegationProofs::ChallengeAgeMicros(absl::string_view pool,
                                             const store::DelegationChallenge& challenge) {
  int64_t first;
  {
    absl::MutexLock lock(&mu_);
    first = FirstSight(pool, challenge.value);
  }
  const int64_t by_sight = clock_->MonotonicMicros() - first;
  const int64_t by_issue = clock_->NowMicros() - challenge.issue_time_us;
  return std::max(by_sight, by_issue);
}

bool DelegationProofs::MaybeIssueChallenge(store::Object& pool_lease) {
  const auto& list = store::DelegationOf(pool_lease).challenges;
  if (!list.empty() && ChallengeAgeMicros(pool_lease.metadata.name, list.front()) <
                           absl::ToInt64Microseconds(options_.challenge_period)) {
    return false;
  }
  std::string value;
  if (options_.random_bytes) {
    unsigned char bytes[kChallengeBytes];
    options_.random_bytes(bytes, sizeof(bytes));
    value = absl::Base64Escape(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  } else {
    value = NewChallengeValue();
  }
  store::DelegationChallenge fresh{std::move(value), clock_->NowMicros()};
  {
    absl::MutexLock lock(&mu_);
    FirstSight(pool_lease.metadata.name, fresh.value);
  }
  auto& challenges = store::MutableDelegation(pool_lease).challenges;
  challenges.insert(challenges.begin(), std::move(fresh));
  if (challenges.size() > options_.ChallengesKept()) challenges.resize(options_.ChallengesKept());
  issued_->Inc();
  return true;
}

std::optional<std::string> DelegationProofs::PoolHolding(absl::string_view value,
                                                         absl::string_view except) {
  absl::MutexLock lock(&mu_);
  for (const auto& [pool, list] : seen_) {
    if (pool == except) continue;
    for (const Seen& s : list) {
      if (s.value == value) return pool;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- the check

DelegationProofs::CachedCertificate DelegationProofs::CertificateFor(const std::string& der,
                                                                     const Fingerprint& fp) {
  const std::string key(reinterpret_cast<const char*>(fp.data()), fp.size());
  std::shared_ptr<const CertificateAuthority> ca;
  uint64_t generation;
  const int64_t now_mono = clock_->MonotonicMicros();
  {
    absl::MutexLock lock(&ca_mu_);
    auto it = certificates_.find(key);
    if (it != certificates_.end() && it->second.ca_generation == ca_generation_ &&
        now_mono - it->second.verified_mono_us < absl::ToInt64Microseconds(kCertificateCacheTtl)) {
      return it->second;
    }
    ca = ca_;
    generation = ca_generation_;
  }
  CachedCertificate verdict;
  verdict.ca_generation = generation;
  verdict.verified_mono_us = now_mono;
  if (ca == nullptr) {
    // Not cached: a CA may come any moment.
    verdict.error = CertificateError::kUnknownAuthority;
    verdict.no_ca = true;
    return verdict;
  }
  NodeCertificate::Result result = NodeCertificate::Verify(der, *ca, clock_->NowMicros());
  verdict.certificate = std::move(result.certificate);
  verdict.error = result.error;
  verdict.detail = std::move(result.detail);
  absl::MutexLock lock(&ca_mu_);
  if (generation == ca_generation_) {
    if (certificates_.size() >= kMaxCachedCertificates) certificates_.clear();
    certificates_[key] = verdict;
  }
  return verdict;
}

std::string DelegationProofs::SignatureKeyOf(const NodeCertificate& cert, absl::string_view data,
                                             absl::string_view signature) {
  // The three exactly, length-prefixed so that no two triples share a key (a
  // digest would cost more than the bytes: ~250 of them for a P-256 proof).
  std::string key;
  key.reserve(cert.fingerprint().size() + 16 + data.size() + signature.size());
  key.append(reinterpret_cast<const char*>(cert.fingerprint().data()), cert.fingerprint().size());
  const uint64_t lengths[2] = {data.size(), signature.size()};
  key.append(reinterpret_cast<const char*>(lengths), sizeof(lengths));
  key.append(data.data(), data.size());
  key.append(signature.data(), signature.size());
  return key;
}

void DelegationProofs::Remember(std::string key) {
  absl::MutexLock lock(&memo_mu_);
  if (signatures_.size() >= kMaxRememberedSignatures) {
    older_signatures_ = std::move(signatures_);
    signatures_.clear();
  }
  signatures_.insert(std::move(key));
}

bool DelegationProofs::SignatureHolds(const NodeCertificate& cert, absl::string_view data,
                                      absl::string_view signature, bool in_step) {
  std::string key = SignatureKeyOf(cert, data, signature);
  {
    absl::MutexLock lock(&memo_mu_);
    if (signatures_.contains(key) || older_signatures_.contains(key)) {
      ++memo_hits_;
      return true;
    }
    ++signature_checks_;
  }
  (in_step ? checks_in_step_ : checks_before_step_)->Inc();
  if (!cert.VerifySignature(data, signature)) return false;
  Remember(std::move(key));
  return true;
}

uint64_t DelegationProofs::remembered_signature_hits() const {
  absl::MutexLock lock(&memo_mu_);
  return memo_hits_;
}

uint64_t DelegationProofs::signature_checks() const {
  absl::MutexLock lock(&memo_mu_);
  return signature_checks_;
}

void DelegationProofs::Precheck(const store::DelegationProof& proof, const std::string& node) {
  // What Verify would refuse before the signature is left to Verify (with its
  // reason and its count): here it only ends the precheck.
  if (options_.mode == ProofMode::kOff || proof.heartbeat.empty() ||
      proof.heartbeat.size() > kMaxProofHeartbeatChars || proof.certificate.empty() ||
      proof.certificate.size() > kMaxProofCertificateChars) {
    return;
  }
  std::string datagram;
  if (!absl::Base64Unescape(proof.heartbeat, &datagram) || datagram.empty()) return;
  auto decoded = DecodeDatagram(datagram);
  if (!decoded.ok() || decoded->type != DatagramType::kHeartbeat) return;
  const SignedHeartbeat& signed_hb = decoded->heartbeat;
  if (signed_hb.heartbeat.node != node) return;
  std::string der;
  if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(proof.certificate), "-----BEGIN")) {
    auto converted = PemToDer(proof.certificate);
    if (!converted.ok()) return;
    der = *std::move(converted);
  } else if (!absl::Base64Unescape(proof.certificate, &der) || der.empty()) {
    return;
  }
  const Fingerprint fp = CertificateFingerprint(der);
  if (fp != signed_hb.heartbeat.certificate_fingerprint) return;
  CachedCertificate cert = CertificateFor(der, fp);
  if (cert.certificate == nullptr || cert.certificate->node() != node) return;
  SignatureHolds(*cert.certificate, signed_hb.signed_bytes, signed_hb.signature,
                 /*in_step=*/false);
}

absl::Status DelegationProofs::Refuse(absl::string_view node, absl::string_view rule,
                                      absl::string_view message) {
  proofs_->WithLabels({base::Sv(rule)}).Inc();
  store::ApiErrorInfo info;
  info.code = 403;
  info.reason = "Forbidden";
  info.message = absl::StrCat(kResource, ".", store::kGroup, " ", base::GoQuote(std::string(node)),
                              " is forbidden: delegation proof refused (", rule, "): ", message);
  info.name = std::string(node);
  info.group = store::kGroup;
  info.kind = kResource;
  info.causes.push_back(
      store::FieldCause{"FieldValueForbidden", absl::StrCat(rule, ": ", message), "spec.proof"});
  return store::MakeApiError(absl::StatusCode::kPermissionDenied, info);
}

void DelegationProofs::Accepted() { proofs_->WithLabels({"accepted"}).Inc(); }

void DelegationProofs::CountUnproven() { unproven_->Inc(); }

absl::Status DelegationProofs::ProofRequired(const std::string& node, const std::string& pool) {
  return Refuse(node, "missing",
                absl::StrCat("the write carries no spec.proof, and the server requires one "
                             "(--delegation-proof=required): send node ", base::GoQuote(node),
                             "'s latest signed heartbeat (cut off from the cloud, with a recent "
                             "challenge of poolleases/", pool, ") and its certificate"));
}

uint64_t DelegationProofs::Count(absl::string_view result) const {
  return proofs_->WithLabels({base::Sv(result)}).Value();
}

absl::StatusOr<store::AcceptedProof> DelegationProofs::Verify(
    const store::DelegationProof& proof, const std::string& node, const std::string& pool,
    const store::Object& pool_lease, const std::optional<store::AcceptedProof>& last,
    std::optional<int32_t> lease_duration_seconds) {
  auto invalid = [&](std::vector<store::FieldCause> causes) {
    proofs_->WithLabels({"malformed"}).Inc();
    return store::InvalidError(kKind, node, std::move(causes));
  };
  const int64_t max_age_us = absl::ToInt64Microseconds(options_.max_age);

  // --- 422: the write's fields and the proof's encoding.
  std::vector<store::FieldCause> causes;
  if (lease_duration_seconds &&
      static_cast<int64_t>(*lease_duration_seconds) * 1'000'000 > max_age_us) {
    causes.push_back(store::FieldInvalid(
        "spec.leaseDurationSeconds", std::to_string(*lease_duration_seconds),
        absl::StrCat("must be at most ", DurationText(options_.max_age),
                     " (--delegation-proof-max-age) when the write carries a proof: a proof "
                     "vouches for its node only while its challenge is fresh")));
  }
  // Every malformed field in one 422, as a validation does: the heartbeat and the
  // certificate are checked apart, so a bad heartbeat does not hide a bad certificate.
  std::optional<SignedHeartbeat> heartbeat;
  std::string datagram;
  if (proof.heartbeat.empty()) {
    causes.push_back(store::FieldRequired(
        "spec.proof.heartbeat",
        "base64 of the member's latest heartbeat datagram, exactly as received"));
  } else if (proof.heartbeat.size() > kMaxProofHeartbeatChars) {
    causes.push_back(store::FieldTooLong(
        "spec.proof.heartbeat",
        absl::StrCat("may not be longer than ", kMaxProofHeartbeatChars,
                     " (base64 of a heartbeat datagram of at most ", kMaxDatagramBytes,
                     " bytes)")));
  } else if (!absl::Base64Unescape(proof.heartbeat, &datagram) || datagram.empty()) {
    causes.push_back(store::FieldInvalid("spec.proof.heartbeat",
                                         absl::StrCat("<", proof.heartbeat.size(), " characters>"),
                                         "must be base64 (RFC 4648, standard alphabet)"));
  } else if (auto decoded = DecodeDatagram(datagram); !decoded.ok()) {
    causes.push_back(store::FieldInvalid("spec.proof.heartbeat",
                                         absl::StrCat("<", datagram.size(), " bytes>"),
                                         absl::StrCat("is not a heartbeat datagram: ",
                                                      decoded.status().message())));
  } else if (decoded->type != DatagramType::kHeartbeat) {
    causes.push_back(store::FieldInvalid(
        "spec.proof.heartbeat", absl::StrCat("<", datagram.size(), " bytes>"),
        absl::StrCat("is a datagram of type ", static_cast<int>(decoded->type),
                     ", not a heartbeat (type 1)")));
  } else if (decoded->heartbeat.heartbeat.sequence >
             static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    causes.push_back(store::FieldInvalid("spec.proof.heartbeat",
                                         std::to_string(decoded->heartbeat.heartbeat.sequence),
                                         "the heartbeat's sequence number must be below 2^63"));
  } else {
    heartbeat = std::move(decoded->heartbeat);
  }
  std::string der;
  if (proof.certificate.empty()) {
    causes.push_back(store::FieldRequired(
        "spec.proof.certificate",
        "the member's client certificate the heartbeat names: base64 of its DER, or PEM"));
  } else if (proof.certificate.size() > kMaxProofCertificateChars) {
    causes.push_back(store::FieldTooLong(
        "spec.proof.certificate",
        absl::StrCat("may not be longer than ", kMaxProofCertificateChars)));
  } else if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(proof.certificate),
                              "-----BEGIN")) {
    auto converted = PemToDer(proof.certificate);
    if (converted.ok()) {
      der = *std::move(converted);
    } else {
      causes.push_back(store::FieldInvalid("spec.proof.certificate", "<PEM>",
                                           base::Sv(converted.status().message())));
    }
  } else if (!absl::Base64Unescape(proof.certificate, &der) || der.empty()) {
    causes.push_back(store::FieldInvalid(
        "spec.proof.certificate", absl::StrCat("<", proof.certificate.size(), " characters>"),
        "must be base64 of the certificate's DER (RFC 4648, standard alphabet), or PEM"));
  }
  if (!causes.empty()) return invalid(std::move(causes));
  const SignedHeartbeat& signed_hb = *heartbeat;
  const Heartbeat& hb = signed_hb.heartbeat;

  // --- 403: the certificate, the signature, then what the heartbeat says.
  const Fingerprint fp = CertificateFingerprint(der);
  if (fp != hb.certificate_fingerprint) {
    return Refuse(node, "certificate_mismatch",
                  absl::StrCat("the heartbeat was signed with the certificate of SHA-256 ",
                               FingerprintHex(hb.certificate_fingerprint),
                               ", but spec.proof.certificate has SHA-256 ", FingerprintHex(fp),
                               "; send the certificate the heartbeat names"));
  }
  CachedCertificate cert = CertificateFor(der, fp);
  if (cert.error == CertificateError::kMalformed) {
    return invalid({store::FieldInvalid("spec.proof.certificate",
                                        absl::StrCat("<", der.size(), " bytes>"),
                                        absl::StrCat("is not a certificate: ", cert.detail))});
  }
  if (cert.no_ca) {
    return Refuse(node, "no_client_ca",
                  "the server has no client CA to check node certificates against; configure "
                  "--client-ca-file, or the client-ca-file of "
                  "kube-system/extension-apiserver-authentication");
  }
  const std::string want_user = absl::StrCat(kNodeUserPrefix, node);
  if (cert.error != CertificateError::kNone) {
    std::string remedy;
    switch (cert.error) {
      case CertificateError::kUnknownAuthority:
        remedy = "send the node's kubelet client certificate, issued by the cluster's client CA";
        break;
      case CertificateError::kExpired:
        remedy = "the node must renew its kubelet client certificate";
        break;
      case CertificateError::kWrongIdentity:
        remedy = absl::StrCat("send a client certificate of ", want_user, " in group ",
                              kNodesGroup);
        break;
      default:
        remedy = "node keys must be ECDSA P-256 or RSA 2048 to 4096 bits";
        break;
    }
    return Refuse(node, CertificateRule(cert.error),
                  absl::StrCat("the certificate was refused: ", cert.detail, "; ", remedy));
  }
  const NodeCertificate& nc = *cert.certificate;
  if (nc.node() != node) {
    return Refuse(node, "wrong_identity",
                  absl::StrCat("the certificate names ", kNodeUserPrefix, nc.node(), ", not ",
                               want_user, "; the proof for delegatedleases/", node,
                               " must carry ", node, "'s own certificate and heartbeat"));
  }
  if (!nc.ValidAt(clock_->NowMicros())) {
    return Refuse(node, "expired_certificate",
                  absl::StrCat("the certificate of ", want_user,
                               " is outside its validity on the server's clock; the node must "
                               "renew its kubelet client certificate"));
  }
  if (hb.node != node) {
    return Refuse(node, "wrong_node",
                  absl::StrCat("the heartbeat is node ", base::GoQuote(hb.node), "'s, not ",
                               base::GoQuote(node), "'s; send ", node, "'s own heartbeat"));
  }
  if (!SignatureHolds(nc, signed_hb.signed_bytes, signed_hb.signature, /*in_step=*/true)) {
    return Refuse(node, "bad_signature",
                  absl::StrCat("the heartbeat's signature does not verify with the key of ",
                               want_user,
                               "; send the heartbeat's bytes and signature exactly as received"));
  }
  if (hb.pool != pool) {
    return Refuse(node, "wrong_pool",
                  absl::StrCat("the heartbeat names pool ", base::GoQuote(hb.pool), ", but node ",
                               base::GoQuote(node), " belongs to pool ", base::GoQuote(pool),
                               "; its heartbeat must name its own pool"));
  }
  if (hb.cloud_reachable) {
    return Refuse(node, "reachable",
                  absl::StrCat("the heartbeat (sequence ", hb.sequence, ") says node ",
                               base::GoQuote(node),
                               " reaches the cloud; a node that reaches the cloud renews its own "
                               "Lease: delete its DelegatedLease instead"));
  }
  const std::string current_hint =
      absl::StrCat("members sign the current challenge of poolleases/", pool,
                   " (status.challenges[0]), which the leader relays");
  if (hb.challenge.empty()) {
    return Refuse(node, "no_challenge",
                  absl::StrCat("the heartbeat carries no challenge; ", current_hint));
  }
  const auto& listed = store::DelegationOf(pool_lease).challenges;
  {
    absl::MutexLock lock(&mu_);
    ObserveLocked(pool, listed);
  }
  const store::DelegationChallenge* found = nullptr;
  for (const auto& c : listed) {
    if (c.value == hb.challenge) found = &c;
  }
  if (found == nullptr) {
    if (auto other = PoolHolding(hb.challenge, pool)) {
      return Refuse(node, "foreign_challenge",
                    absl::StrCat("the heartbeat's challenge was issued to pool ",
                                 base::GoQuote(*other), ", not to pool ", base::GoQuote(pool),
                                 "; ", current_hint));
    }
    bool retired = false;
    int64_t retired_age = 0;
    {
      absl::MutexLock lock(&mu_);
      auto it = seen_.find(pool);
      if (it != seen_.end()) {
        for (const Seen& s : it->second) {
          if (s.value == hb.challenge) {
            retired = true;
            retired_age = clock_->MonotonicMicros() - s.first_sight_mono_us;
          }
        }
      }
    }
    if (retired) {
      return Refuse(node, "stale_challenge",
                    absl::StrCat("the heartbeat's challenge is no longer among the recent "
                                 "challenges of poolleases/", pool, " (this server first saw it ",
                                 Seconds(retired_age), " ago): it is older than "
                                 "--delegation-proof-max-age ", DurationText(options_.max_age),
                                 "; ", current_hint));
    }
    return Refuse(node, "unknown_challenge",
                  absl::StrCat("the heartbeat's challenge is not one this server issued to pool ",
                               base::GoQuote(pool), " recently; ", current_hint));
  }
  const int64_t age = ChallengeAgeMicros(pool, *found);
  if (age > max_age_us) {
    return Refuse(node, "stale_challenge",
                  absl::StrCat("the heartbeat's challenge was issued ", Seconds(age),
                               " ago, longer than --delegation-proof-max-age ",
                               DurationText(options_.max_age), "; ", current_hint));
  }
  const std::string boot = BootIdHex(hb.boot_id);
  if (last && last->boot_id == boot && static_cast<int64_t>(hb.sequence) <= last->sequence) {
    return Refuse(node, "replay",
                  absl::StrCat("the heartbeat (boot id ", boot, ", sequence ", hb.sequence,
                               ") is not newer than the last proof accepted for node ",
                               base::GoQuote(node), " (sequence ", last->sequence,
                               "); send the member's latest heartbeat"));
  }
  Accepted();
  return store::AcceptedProof{boot, static_cast<int64_t>(hb.sequence), hb.challenge};
}

}  // namespace poolcoord::election
