// Verifiable delegation (docs/verifiable-delegation.md): the server
// accepts a pool leader's DelegatedLease write only with the member's own signed,
// fresh proof of life. One place, used by the lease rules of every replica.
//
// Challenges. The server gives each pool a fresh random challenge with the
// leader's own PoolLease writes: an accepted write that leaves the lease held
// gets a new challenge, first in status.challenges, when the current one is at
// least `challenge_period` old (LeaseRules::AdmitPoolLeaseWrite); the recent
// ones stay (ChallengesKept()). Issuing with the renewal, inside its atomic
// step, costs no write of its own, never changes a PoolLease's resourceVersion
// under a client that read it (no 409 for a leader between its GET and PUT),
// and needs no choice of issuer among replicas: whichever serves the renewal
// issues. The leader's renewals come every retry period (2 s in client-go),
// well within the period; the renewal's answer carries the challenge, which the
// leader relays on the pool LAN; each member signs the latest it heard into its
// heartbeat (election/heartbeat.h).
//
// Age of a challenge, judged by this process alone (no node's clock is read):
//   age = max(now_mono - first_sight_mono, now_wall - issueTime)
// first_sight_mono is this process's monotonic time when it first saw the
// challenge (it issued it, or read it in a write's transaction: a renewal, a
// proof check); issueTime is the issuing replica's wall clock. The first term
// can only under-estimate the age, by how late this process first saw the
// challenge (unbounded for one another replica issued long before, or that
// predates this process). The second term is exact while the replicas' wall
// clocks agree, and covers those cases; a clock step on either side only ever
// makes the age larger (never a fresher challenge), so an error refuses an
// honest proof rather than accepting a stale one.
//
// The proof check, in order, each failure naming its rule and what would pass:
//   422 (malformed; Verify's InvalidError, causes under spec.proof):
//       heartbeat/certificate missing, too long, not base64 (or PEM), not a
//       heartbeat datagram (the decoder's reason), a sequence of 2^63 or more;
//       spec.leaseDurationSeconds above max_age (a proof vouches for its node no
//       longer than its challenge is fresh); every one of these in one 422
//   403 (refused; ForbiddenError with one cause, field spec.proof, message
//       "<rule>: ..."; the metric label is <rule>):
//       missing               no spec.proof, and --delegation-proof=required
//       certificate_mismatch  the heartbeat names another certificate (SHA-256)
//       wrong_node            the heartbeat is another node's
//       wrong_pool            the heartbeat names another pool
//       reachable             the heartbeat says its node reaches the cloud
//       no_challenge          the heartbeat carries no challenge
//       foreign_challenge     the challenge is another pool's
//       unknown_challenge     not one of the pool's recent challenges
//       stale_challenge       issued longer than max_age ago
//       replay                not newer than the last proof accepted for the
//                             node (same boot id, sequence not above)
//       no_client_ca          the server has no client CA to check it against
//       unknown_authority, expired_certificate, wrong_identity (not
//       system:node:<this node> in system:nodes, or not for client auth),
//       unsupported_key       the certificate (election/node_certificate.h)
//       bad_signature         the signature does not verify
//
// Certificates are verified once per SHA-256 fingerprint and CA bundle and
// cached (kCertificateCacheTtl, kMaxCachedCertificates); each use checks the
// certificate's validity window again. A new client CA bundle empties the cache.
//
// Precheck: the signature check (a P-256 verify is ~90 µs, more than the rest
// of a renewal) depends on nothing stored, so the API runs it before the
// store's atomic step (Strategy::Precheck), where it holds no lock: on the
// memory store Verify runs under the store's one write lock, and every other
// write waited behind each verify. Precheck remembers the signatures that
// verified (the certificate's fingerprint, the signed bytes and the signature,
// ~250 bytes for P-256; kMaxRememberedSignatures, two generations); Verify then makes
// every check as before, and for the signature finds it remembered. Sound as
// the agent's VerificationMemo is: whether a signature verifies with a
// certificate's key is a pure function of the three; only successes are kept.
//
// Metrics (names read by dashboards: keep them):
//   poolcoord_delegation_proofs_total{result}    accepted | <rule>
//   poolcoord_delegation_unproven_writes_total   writes without a proof let
//                                                through by --delegation-proof=optional
//   poolcoord_delegation_challenges_issued_total  (with accepted PoolLease writes)
//   poolcoord_delegation_signature_checks_total{phase}  before_step (Precheck) |
//                                                in_step (Verify, not remembered)
// A proof check runs inside Store::Update, which the etcd3 store may repeat on
// a conflict: an accepted proof is then counted once per attempt.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "election/node_certificate.h"
#include "store/object.h"

namespace poolcoord::election {

// --delegation-proof.
enum class ProofMode {
  kOff,       // proofs ignored (and dropped): the leader's word is taken
  kOptional,  // a proof given is checked; a write without one is let through and counted
  kRequired,  // every DelegatedLease write by a pool leader carries a valid proof
};
// "off" | "optional" | "required"; InvalidArgument naming the choices otherwise.
absl::StatusOr<ProofMode> ParseProofMode(absl::string_view text);
const char* ProofModeName(ProofMode mode);

struct DelegationProofOptions {
  // As --delegation-proof's default (apiservice/flags.h): optional until the
  // agent that sends proofs is deployed everywhere.
  ProofMode mode = ProofMode::kOptional;
  // --delegation-challenge-period: a pool's current challenge is replaced once
  // it is this old.
  absl::Duration challenge_period = absl::Seconds(5);
  // --delegation-proof-max-age: the oldest challenge a proof may carry. The
  // default is 2 x the agents' heartbeat interval (5 s) + the challenge period:
  // the leader relays a challenge in its next heartbeat, the member signs it
  // into its next one.
  absl::Duration max_age = absl::Seconds(15);
  // Where a challenge's random bytes come from; unset: OpenSSL's DRBG
  // (RAND_bytes). A simulator on one seeded scheduler sets a seeded source,
  // so that a run repeats; no flag reaches it (a predictable challenge would
  // defeat the protocol).
  std::function<void(unsigned char* bytes, size_t n)> random_bytes;

  // Challenges kept in a PoolLease's status: every one younger than max_age,
  // and one more (ceil(max_age / period) + 1, from 2 to 64).
  size_t ChallengesKept() const;
  // InvalidArgument when a duration is not positive.
  absl::Status Validate() const;
};

inline constexpr absl::Duration kCertificateCacheTtl = absl::Minutes(5);
inline constexpr size_t kMaxCachedCertificates = 16384;
// Bounds of spec.proof's fields (base64 of the largest heartbeat datagram and
// certificate; PEM adds its lines).
inline constexpr size_t kMaxProofHeartbeatChars = 1868;   // 4 * ceil(1400 / 3)
inline constexpr size_t kMaxProofCertificateChars = 8192;
// Verified signatures remembered per generation (two generations: the last
// 4,096 to 8,192; at most ~2.5 MB with RSA 2048's 256-byte signatures). Precheck
// and Verify of one write are milliseconds apart: this is thousands of writes.
inline constexpr size_t kMaxRememberedSignatures = 4096;

class DelegationProofs {
 public:
  // `clock` is not owned and must outlive this object; `metrics` may be null.
  DelegationProofs(const base::Clock* clock, DelegationProofOptions options,
                   base::MetricsRegistry* metrics);
  DelegationProofs(const DelegationProofs&) = delete;
  DelegationProofs& operator=(const DelegationProofs&) = delete;

  ProofMode mode() const { return options_.mode; }
  const DelegationProofOptions& options() const { return options_; }
  const base::Clock* clock() const { return clock_; }

  // The cluster's client CA bundle (PEM) that node certificates must chain to:
  // --client-ca-file's and the authentication ConfigMap's client-ca-file. ""
  // removes it (every proof is then refused: no_client_ca). InvalidArgument
  // (changing nothing) for PEM without a certificate.
  absl::Status SetClientCaPem(absl::string_view pem);
  // The same with the bundle already parsed (nullptr removes it): a simulator
  // gives one made with CertificateAuthorityOptions::modelled_signatures.
  void SetClientCa(std::shared_ptr<const CertificateAuthority> ca);

  // --- challenges

  // A fresh challenge value: base64 of 32 random bytes (44 characters), from
  // OpenSSL's DRBG.
  static std::string NewChallengeValue();
  // Records this process's first sight of each challenge of a PoolLease.
  void Observe(const store::Object& pool_lease);
  // The challenge's age on this process (see the file comment), in µs; records
  // its first sight when this is it.
  int64_t ChallengeAgeMicros(absl::string_view pool, const store::DelegationChallenge& challenge);
  // With a PoolLease write the rules accepted (inside its atomic step): when the
  // pool's current challenge is missing or at least challenge_period old, puts
  // a fresh one (issued now on both clocks) first in `pool_lease`'s
  // status.challenges, keeping ChallengesKept(). Returns whether it did.
  bool MaybeIssueChallenge(store::Object& pool_lease);

  // --- the check

  // Checks a leader's proof for DelegatedLease `node` of `pool` (validated:
  // the node's pool) against the pool's PoolLease as read in the write's
  // transaction and the node's last accepted proof. Returns what to record as
  // status.proof. Errors: InvalidError (422, kind DelegatedLease) or
  // ForbiddenError (403), as the file comment lists.
  absl::StatusOr<store::AcceptedProof> Verify(const store::DelegationProof& proof,
                                              const std::string& node, const std::string& pool,
                                              const store::Object& pool_lease,
                                              const std::optional<store::AcceptedProof>& last,
                                              std::optional<int32_t> lease_duration_seconds);
  // Before the write's atomic step, off any store lock: verifies the proof's
  // certificate (cached as Verify does) and signature for `node`, and remembers
  // the signature when it verifies. Judges nothing: a proof that fails here is
  // refused by Verify with its reason; counts nothing in the metrics.
  void Precheck(const store::DelegationProof& proof, const std::string& node);
  // Signatures Verify found remembered (Precheck) and checked itself, for tests.
  uint64_t remembered_signature_hits() const;
  uint64_t signature_checks() const;

  // A write let through without a proof (--delegation-proof=optional).
  void CountUnproven();
  // The 403 for a write without a proof under --delegation-proof=required
  // (counted as "missing").
  absl::Status ProofRequired(const std::string& node, const std::string& pool);

  // Counts by result ("accepted", or a rule name), for tests.
  uint64_t Count(absl::string_view result) const;

 private:
  struct Seen {
    std::string value;
    int64_t first_sight_mono_us = 0;
  };
  struct CachedCertificate {
    std::shared_ptr<const NodeCertificate> certificate;  // null when refused
    CertificateError error = CertificateError::kNone;
    std::string detail;
    bool no_ca = false;  // no client CA configured: nothing was checked (not cached)
    uint64_t ca_generation = 0;
    int64_t verified_mono_us = 0;
  };

  absl::Status Refuse(absl::string_view node, absl::string_view rule, absl::string_view message);
  void Accepted();
  // First sight of `value` for `pool` (now, when unseen).
  int64_t FirstSight(absl::string_view pool, absl::string_view value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ObserveLocked(absl::string_view pool, const std::vector<store::DelegationChallenge>& list)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Another pool whose recent challenges hold `value`, if this process saw one.
  std::optional<std::string> PoolHolding(absl::string_view value, absl::string_view except);
  // The verified certificate for `der` (cached), or the refusal.
  CachedCertificate CertificateFor(const std::string& der, const Fingerprint& fingerprint);
  // The memo's key: the certificate's fingerprint, the signed bytes and the
  // signature.
  static std::string SignatureKeyOf(const NodeCertificate& cert, absl::string_view data,
                                    absl::string_view signature);
  // cert.VerifySignature(data, signature), or true when remembered.
  bool SignatureHolds(const NodeCertificate& cert, absl::string_view data,
                      absl::string_view signature, bool in_step);
  // Remembers a signature that verified.
  void Remember(std::string key);

  const base::Clock* const clock_;
  const DelegationProofOptions options_;
  base::CounterFamily* proofs_ = nullptr;
  base::Counter* unproven_ = nullptr;
  base::Counter* issued_ = nullptr;
  base::Counter* checks_before_step_ = nullptr;
  base::Counter* checks_in_step_ = nullptr;
  std::unique_ptr<base::MetricsRegistry> own_metrics_;  // when none was given

  absl::Mutex mu_;
  // pool -> the challenges seen for it, oldest first sight first.
  absl::flat_hash_map<std::string, std::vector<Seen>> seen_ ABSL_GUARDED_BY(mu_);

  absl::Mutex ca_mu_;
  std::shared_ptr<const CertificateAuthority> ca_ ABSL_GUARDED_BY(ca_mu_);
  uint64_t ca_generation_ ABSL_GUARDED_BY(ca_mu_) = 0;
  // SHA-256 of the DER, as bytes -> the verdict.
  absl::flat_hash_map<std::string, CachedCertificate> certificates_ ABSL_GUARDED_BY(ca_mu_);

  mutable absl::Mutex memo_mu_;
  // The current generation and the one before (Remember moves it there when full).
  absl::flat_hash_set<std::string> signatures_ ABSL_GUARDED_BY(memo_mu_);
  absl::flat_hash_set<std::string> older_signatures_ ABSL_GUARDED_BY(memo_mu_);
  uint64_t memo_hits_ ABSL_GUARDED_BY(memo_mu_) = 0;
  uint64_t signature_checks_ ABSL_GUARDED_BY(memo_mu_) = 0;
};

}  // namespace poolcoord::election
