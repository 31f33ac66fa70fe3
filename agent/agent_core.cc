#include "agent/agent_core.h"

#include <openssl/rand.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "cloud/errors.h"

namespace poolcoord::agent {
namespace {

constexpr int64_t kNever = INT64_MAX;
constexpr int64_t kProofWayUs = 1'000'000;

// At most one line per key and minute: a flood of bad datagrams must not turn
// into a flood of log lines (the counters have every one).
void LogLimited(const std::string& key, char severity, const std::string& text) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* last = new std::map<std::string, std::chrono::steady_clock::time_point>();
  const auto now = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&mu);
    auto [it, inserted] = last->try_emplace(key, now);
    if (!inserted && now - it->second < std::chrono::minutes(1)) return;
    it->second = now;
  }
  base::LogLine(severity, text);
}

int32_t CeilSeconds(int64_t us) { return static_cast<int32_t>((us + 999'999) / 1'000'000); }

AgentOptions Normalize(AgentOptions o) {
  if (o.reachability.probe_period_us <= 0) o.reachability.probe_period_us = o.freshness.heartbeat_interval_us;
  if (o.delegation.lease_duration_seconds <= 0) {
    o.delegation.lease_duration_seconds = CeilSeconds(o.freshness.bound_us());
    // A proof vouches for a member only while its challenge is fresh: the
    // server refuses (422) a proven write that asks for longer.
    if (o.proof_max_age_seconds > 0) {
      o.delegation.lease_duration_seconds =
          std::min(o.delegation.lease_duration_seconds, o.proof_max_age_seconds);
    }
  }
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AgentCore>> AgentCore::New(
    std::shared_ptr<const NodeIdentity> identity, std::shared_ptr<const CertificateAuthority> ca,
    const base::Clock* clock, LanTransport* lan, AgentCloud* cloud, AgentOptions options) {
  if (identity == nullptr || ca == nullptr || clock == nullptr || lan == nullptr) {
    return absl::InvalidArgumentError("identity, CA, clock and LAN transport are required");
  }
  const AgentOptions& o = options;
  if (o.freshness.heartbeat_interval_us <= 0 || o.freshness.margin_us < 0) {
    return absl::InvalidArgumentError("the heartbeat interval must be positive, the margin not negative");
  }
  if (o.reachability.request_timeout_us <= 0 ||
      o.reachability.request_timeout_us >= absl::ToInt64Microseconds(o.renew_deadline)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request timeout (", o.reachability.request_timeout_us / 1000,
        " ms) must be positive and below the renew deadline, so one hung request cannot cost the "
        "leader its lease"));
  }
  if (o.certificate_push_rounds < 1 || o.certificate_repeat_rounds < 1) {
    return absl::InvalidArgumentError("certificate push and repeat rounds must be at least 1");
  }
  auto core = std::unique_ptr<AgentCore>(
      new AgentCore(std::move(identity), std::move(ca), clock, lan, cloud, Normalize(options)));
  if (cloud != nullptr) {
    election::LeaderElectionConfig config;
    config.lock = cloud->PoolLeaseLock();
    config.lease_duration = o.lease_duration;
    config.renew_deadline = o.renew_deadline;
    config.retry_period = o.retry_period;
    config.release_on_cancel = true;
    config.name = "poolcoord-agent";
    config.clock = clock;
    config.jitter_seed = o.jitter_seed;
    AgentCore* self = core.get();
    config.callbacks.on_started_leading = [self] {
      // The acquiring write's answer carries the challenge to relay: set it
      // before the heartbeats say "leader", so the first one relays it.
      const int64_t now = self->clock_->MonotonicMicros();
      self->planner_.StartLeading(now);
      self->term_challenges_.clear();
      self->ObserveChallenges(now);
      self->stats_.elections_won.fetch_add(1);
      absl::MutexLock lock(&self->mu_);
      self->leading_ = true;
    };
    config.callbacks.on_stopped_leading = [self] {
      self->planner_.StopLeading();
      self->pending_.clear();
      absl::MutexLock lock(&self->mu_);
      self->leading_ = false;
    };
    auto elector = election::LeaderElector::New(std::move(config));
    if (!elector.ok()) return elector.status();
    core->elector_ = std::move(*elector);
    cloud->set_request_observer([self](bool answered) { self->OnCloudRequest(answered); });
  }
  return core;
}

AgentCore::AgentCore(std::shared_ptr<const NodeIdentity> identity,
                     std::shared_ptr<const CertificateAuthority> ca, const base::Clock* clock,
                     LanTransport* lan, AgentCloud* cloud, AgentOptions options)
    : options_(std::move(options)),
      clock_(clock),
      lan_(lan),
      cloud_(cloud),
      boot_id_(options_.boot_id),
      identity_(std::move(identity)),
      pool_(std::make_shared<const PoolView>()),
      peers_(options_.freshness),
      verifier_(std::move(ca), clock,
                VerifierOptions{.needed = options_.lazy_verification
                                              ? std::function<bool(const Heartbeat&)>(
                                                    [this](const Heartbeat& hb) { return SignatureNeeded(hb); })
                                              : nullptr,
                                .sample_period_us = options_.verification_sample_period_us,
                                .memo = options_.verification_memo}),
      start_us_(clock->MonotonicMicros()),
      reachability_(options_.reachability),
      planner_(options_.delegation) {
  if (boot_id_ == BootId{}) RAND_bytes(boot_id_.data(), static_cast<int>(boot_id_.size()));
}

AgentCore::~AgentCore() = default;

bool AgentCore::SignatureNeeded(const Heartbeat& hb) const {
  if (!hb.cloud_reachable || hb.leader) return true;
  absl::MutexLock lock(&mu_);
  return watched_.count(hb.node) != 0;
}

void AgentCore::UpdateWatched() {
  std::set<std::string> watched = planner_.Watched();
  absl::MutexLock lock(&mu_);
  watched_ = std::move(watched);
}

void AgentCore::SetPool(std::shared_ptr<const PoolView> pool) {
  absl::MutexLock lock(&mu_);
  pool_ = std::move(pool);
  ++pool_generation_;
  peers_.Retain(*pool_);
  for (auto it = heard_.begin(); it != heard_.end();) {
    it = pool_->IsMember(it->first) ? std::next(it) : heard_.erase(it);
  }
}

void AgentCore::SetIdentity(std::shared_ptr<const NodeIdentity> identity) {
  absl::MutexLock lock(&mu_);
  identity_ = std::move(identity);
  ++identity_generation_;
}

void AgentCore::set_server_challenge(std::string challenge) {
  absl::MutexLock lock(&mu_);
  server_challenge_ = std::move(challenge);
}

std::string AgentCore::challenge() const {
  absl::MutexLock lock(&mu_);
  return leading_ ? server_challenge_ : peers_.LeaderChallenge();
}

AgentStatus AgentCore::status() const {
  AgentStatus s;
  const int64_t now = clock_->MonotonicMicros();
  absl::MutexLock lock(&mu_);
  s.reachable = reachable_;
  s.seen = seen_;
  s.leading = leading_;
  s.leader = elector_ != nullptr ? elector_->GetLeader() : "";
  s.members = pool_->members.size();
  s.peers_fresh = peers_.CountFresh(now);
  for (const auto& [node, arrival] : heard_) {
    if (pool_->IsMember(node) && now - arrival < options_.freshness.bound_us()) ++s.peers_heard;
  }
  s.sequence = sequence_;
  return s;
}

bool AgentCore::leading() const {
  absl::MutexLock lock(&mu_);
  return leading_;
}

std::map<std::string, int64_t> AgentCore::proof_refusals() const {
  absl::MutexLock lock(&mu_);
  return proof_refusals_;
}

std::shared_ptr<const VerifiedHeartbeat> AgentCore::LatestOf(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  return peers_.Latest(node);
}

// ---------------------------------------------------------------- LAN side

void AgentCore::SyncVerifierPool() {
  std::shared_ptr<const PoolView> pool;
  {
    absl::MutexLock lock(&mu_);
    if (verifier_pool_generation_ == pool_generation_) return;
    verifier_pool_generation_ = pool_generation_;
    pool = pool_;
  }
  verifier_.SetPool(std::move(pool));
}

void AgentCore::SendTo(const std::string& node, const std::string& address,
                       const std::string& datagram) {
  absl::Status s = lan_->Send(address, datagram);
  if (s.ok()) {
    stats_.datagrams_sent.fetch_add(1, std::memory_order_relaxed);
  } else {
    stats_.send_errors.fetch_add(1, std::memory_order_relaxed);
    LogLimited("agent-send", 'W',
                   absl::StrCat("sending to ", node, " at ", address, ": ", s.message()));
  }
}

void AgentCore::OnDatagram(absl::string_view bytes) {
  OnDatagram(bytes, clock_->MonotonicMicros(), clock_->NowMicros());
}

void AgentCore::OnDatagram(absl::string_view bytes, int64_t arrival_mono_us, int64_t arrival_wall_us) {
  {
    absl::MutexLock lock(&mu_);
    if (pool_->pool.empty()) return;  // no pool known yet: nothing to judge against
  }
  SyncVerifierPool();
  HeartbeatVerifier::Result r = verifier_.Receive(bytes, arrival_mono_us, arrival_wall_us);
  using Kind = HeartbeatVerifier::Result::Kind;
  const int64_t now = clock_->MonotonicMicros();
  switch (r.kind) {
    case Kind::kHeartbeat: {
      absl::MutexLock lock(&mu_);
      if (r.newest) heard_[r.node] = r.heartbeat->arrival_mono_us;
      peers_.Record(std::move(r.heartbeat), r.newest);
      return;
    }
    case Kind::kHeard: {
      absl::MutexLock lock(&mu_);
      heard_[r.node] = arrival_mono_us;
      return;
    }
    case Kind::kCertificate:
      if (r.heartbeat != nullptr) {  // a heartbeat that waited for this certificate
        absl::MutexLock lock(&mu_);
        if (r.newest) heard_[r.node] = r.heartbeat->arrival_mono_us;
        peers_.Record(std::move(r.heartbeat), r.newest);
      }
      return;
    case Kind::kCertificateRequest: {
      auto& last = last_answer_to_[r.node];
      if (last != 0 && now - last < options_.certificate_request_interval_us) return;
      last = now;
      std::string address, datagram;
      {
        absl::MutexLock lock(&mu_);
        address = pool_->AddressOf(r.node);
        datagram = *EncodeCertificateDatagram(identity_->certificate_der());
      }
      if (address.empty()) return;
      stats_.certificate_requests_answered.fetch_add(1, std::memory_order_relaxed);
      stats_.certificates_sent.fetch_add(1, std::memory_order_relaxed);
      SendTo(r.node, address, datagram);
      return;
    }
    case Kind::kDropped: {
      if (r.reason != DropReason::kUnknownCertificate) {
        LogLimited(absl::StrCat("agent-drop-", DropReasonName(r.reason)), 'W',
                   absl::StrCat("dropped a datagram (", DropReasonName(r.reason), "): ", r.detail));
        return;
      }
      auto& last = last_request_to_[r.node];
      if (last != 0 && now - last < options_.certificate_request_interval_us) return;
      last = now;
      std::string address, self;
      {
        absl::MutexLock lock(&mu_);
        address = pool_->AddressOf(r.node);
        self = identity_->node();
      }
      if (address.empty()) return;
      auto request = EncodeCertificateRequest({r.fingerprint, self});
      if (!request.ok()) return;
      stats_.certificate_requests_sent.fetch_add(1, std::memory_order_relaxed);
      SendTo(r.node, address, *request);
      return;
    }
  }
}

void AgentCore::SendRound(int64_t now) {
  std::shared_ptr<const NodeIdentity> identity;
  std::shared_ptr<const PoolView> pool;
  Heartbeat hb;
  int identity_generation;
  {
    absl::MutexLock lock(&mu_);
    identity = identity_;
    pool = pool_;
    hb.cloud_reachable = seen_;
    hb.leader = leading_;
    hb.challenge = leading_ ? server_challenge_ : peers_.LeaderChallenge();
    sent_challenge_ = hb.challenge;
    sent_challenge_source_ = leading_ ? "self" : peers_.LeaderChallengeSource();
    sent_challenge_since_us_ = leading_ ? now : peers_.LeaderChallengeSince();
    identity_generation = identity_generation_;
    if (++sequence_ == 0) sequence_ = 1;  // 2^64 rounds: never, but never 0 either
    hb.sequence = sequence_;
  }
  sent_seen_ = hb.cloud_reachable;
  sent_leading_ = hb.leader;
  if (pool->pool.empty()) return;  // no pool known yet: nobody to tell
  hb.node = identity->node();
  hb.pool = pool->pool;
  hb.boot_id = boot_id_;
  hb.sent_wall_us = clock_->NowMicros();
  hb.certificate_fingerprint = identity->fingerprint();
  auto body = EncodeHeartbeatBody(hb);
  if (!body.ok()) {
    LogLimited("agent-encode", 'E',
                   absl::StrCat("cannot encode the heartbeat: ", body.status().message()));
    return;
  }
  auto signature = identity->Sign(*body);
  if (!signature.ok()) {
    LogLimited("agent-sign", 'E', std::string(signature.status().message()));
    return;
  }
  auto datagram = EncodeHeartbeatDatagram(*body, *signature);
  if (!datagram.ok()) return;
  stats_.rounds.fetch_add(1, std::memory_order_relaxed);

  if (identity_generation != sent_identity_generation_) {
    sent_identity_generation_ = identity_generation;
    push_rounds_left_ = options_.certificate_push_rounds;
  }
  const bool with_certificate =
      push_rounds_left_ > 0 || stats_.rounds.load() % options_.certificate_repeat_rounds == 0;
  if (push_rounds_left_ > 0) --push_rounds_left_;
  std::string certificate;
  if (with_certificate) certificate = *EncodeCertificateDatagram(identity->certificate_der());
  for (const auto& [node, address] : pool->members) {
    if (node == pool->self) continue;
    if (with_certificate) {
      SendTo(node, address, certificate);
      stats_.certificates_sent.fetch_add(1, std::memory_order_relaxed);
    }
    SendTo(node, address, *datagram);
  }
}

int64_t AgentCore::LanStep() {
  SyncVerifierPool();
  const int64_t now = clock_->MonotonicMicros();
  if (!started_) {
    bool probed;
    {
      absl::MutexLock lock(&mu_);
      probed = probed_;
    }
    const int64_t hold_until = start_us_ + options_.reachability.request_timeout_us;
    if (cloud_ != nullptr && !probed && now < hold_until) return hold_until;
    started_ = true;
    next_round_us_ = now;
  }
  bool flags_changed, leading, cut_off;
  std::string challenge, source;
  int64_t since;
  {
    absl::MutexLock lock(&mu_);
    flags_changed = seen_ != sent_seen_ || leading_ != sent_leading_;
    leading = leading_;
    cut_off = !seen_;
    challenge = leading_ ? server_challenge_ : peers_.LeaderChallenge();
    source = leading_ ? "self" : peers_.LeaderChallengeSource();
    since = peers_.LeaderChallengeSince();
  }
  // A round early for a challenge (the file comment): the leader relays a new
  // one at once; a cut-off member signs a new leader's at once, or one that
  // replaces a challenge it held so long that its next round would carry a
  // challenge near or past the server's max-age.
  bool early = false;
  if (challenge != sent_challenge_ && !challenge.empty()) {
    if (leading) {
      early = true;
    } else if (cut_off) {
      const int64_t held_long_us =
          std::max<int64_t>(0, int64_t{options_.proof_max_age_seconds} * 1'000'000 -
                                   options_.freshness.bound_us());
      early = sent_challenge_.empty() || source != sent_challenge_source_ ||
              since == INT64_MIN || sent_challenge_since_us_ == INT64_MIN ||
              since - sent_challenge_since_us_ >= held_long_us;
    }
  }
  if (early && !flags_changed && now < next_round_us_) {
    const int64_t earliest = last_round_us_ == INT64_MIN
                                 ? now
                                 : last_round_us_ + options_.min_round_gap_us;
    if (now < earliest) return std::min(next_round_us_, earliest);
    stats_.challenge_rounds.fetch_add(1, std::memory_order_relaxed);
  }
  if (now >= next_round_us_ || flags_changed || early) {
    SendRound(now);
    last_round_us_ = now;
    next_round_us_ = now + options_.freshness.heartbeat_interval_us;
  }
  return next_round_us_;
}

// ---------------------------------------------------------------- cloud side

void AgentCore::OnCloudRequest(bool answered) {
  reachability_.OnRequest(clock_->MonotonicMicros(), answered);
}

void AgentCore::Probe(int64_t now) {
  std::string self;
  {
    absl::MutexLock lock(&mu_);
    self = identity_->node();
  }
  stats_.probes.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<NodeLeaseObservation> lease = cloud_->ReadNodeLease(self);
  const int64_t after = clock_->MonotonicMicros();
  if (lease.ok()) {
    reachability_.OnNodeLease(after, *lease);
  } else if (lease.status().code() == absl::StatusCode::kNotFound) {
    reachability_.OnNodeLease(after, NodeLeaseObservation{});
  } else {
    stats_.probe_failures.fetch_add(1, std::memory_order_relaxed);
  }
  next_probe_us_ = now + options_.reachability.probe_period_us;
  absl::MutexLock lock(&mu_);
  probed_ = true;
}

void AgentCore::Campaign(int64_t now) {
  const bool seen = reachability_.Seen(now);
  {
    absl::MutexLock lock(&mu_);
    reachable_ = reachability_.Reachable(now);
    seen_ = seen;
  }
  using Phase = election::LeaderElector::Phase;
  if (!seen) {
    // A leader that no longer reaches the cloud steps down at once: nothing
    // more is written, the heartbeat stops saying "leader", then the elector
    // ends its run (its release fails fast without a link).
    if (elector_->phase() != Phase::kStopped) {
      planner_.StopLeading();
      pending_.clear();
      {
        absl::MutexLock lock(&mu_);
        leading_ = false;
      }
      elector_->Cancel();
    }
    return;
  }
  if (elector_->phase() == Phase::kStopped) {
    if (now < campaign_after_us_) return;
    elector_->Restart();
    next_elector_us_ = now;
  }
  if (now >= next_elector_us_) {
    next_elector_us_ = elector_->Step();
    // The answer carries the pool's recent challenges.
    ObserveChallenges(clock_->MonotonicMicros());
  }
}

void AgentCore::ObserveChallenges(int64_t now) {
  std::vector<std::string> listed = cloud_->PoolChallenges();
  std::map<std::string, int64_t> first_sight;
  for (const std::string& c : listed) {
    auto it = challenge_first_sight_.find(c);
    first_sight[c] = it == challenge_first_sight_.end() ? now : it->second;
  }
  challenge_first_sight_ = std::move(first_sight);
  if (planner_.leading()) {
    // The answer to this leader's own renewal (or its read just before it):
    // the server's current challenge, which this term relays.
    if (!listed.empty()) term_challenges_.insert(listed.front());
    for (auto it = term_challenges_.begin(); it != term_challenges_.end();) {
      it = challenge_first_sight_.count(*it) != 0 ? std::next(it) : term_challenges_.erase(it);
    }
    set_server_challenge(listed.empty() ? "" : listed.front());
  }
  listed_challenges_ = std::move(listed);
}

std::optional<std::set<std::string>> AgentCore::UsableChallenges(int64_t now) const {
  if (listed_challenges_.empty()) return std::nullopt;
  // The newest listed challenge not renewed for 2 x max-age while this agent
  // reads the PoolLease: the server has stopped issuing
  // (--delegation-proof=off, the list left from before) and judges no proof.
  const int64_t max_age_full_us = int64_t{options_.proof_max_age_seconds} * 1'000'000;
  if (auto newest = challenge_first_sight_.find(listed_challenges_.front());
      max_age_full_us > 0 && newest != challenge_first_sight_.end() &&
      now - newest->second > 2 * max_age_full_us) {
    return std::nullopt;
  }
  // Less a second for the write's way to the server (it judges the age when
  // the write arrives, and first saw the challenge no later than we did).
  const int64_t max_age_us = int64_t{options_.proof_max_age_seconds} * 1'000'000 - kProofWayUs;
  std::set<std::string> usable;
  for (const std::string& c : term_challenges_) {
    auto it = challenge_first_sight_.find(c);
    if (it == challenge_first_sight_.end()) continue;
    if (options_.proof_max_age_seconds > 0 && now - it->second > max_age_us) continue;
    usable.insert(c);
  }
  return usable;
}

void AgentCore::Execute(const DelegationAction& a) {
  DelegationOutcome outcome = DelegationOutcome::kUnavailable;
  absl::Status status;  // the answer, for the log of a refusal
  std::string version;
  using Kind = DelegationAction::Kind;
  switch (a.kind) {
    case Kind::kRead: {
      auto rv = cloud_->ReadDelegatedLease(a.node);
      status = rv.status();
      outcome = OutcomeFromStatus(rv.status());
      if (rv.ok()) version = *rv;
      break;
    }
    case Kind::kCreate:
    case Kind::kUpdate: {
      DelegatedLeaseWrite w;
      w.node = a.node;
      {
        absl::MutexLock lock(&mu_);
        w.pool = pool_->pool;
        w.delegate = identity_->node();
      }
      w.renew_time_us = a.renew_time_us;
      w.lease_duration_seconds = a.lease_duration_seconds;
      w.resource_version = a.kind == Kind::kUpdate ? a.resource_version : "";
      w.evidence = a.evidence;
      auto rv = cloud_->WriteDelegatedLease(w);
      status = rv.status();
      outcome = OutcomeFromStatus(rv.status());
      if (rv.ok()) version = *rv;
      if (outcome == DelegationOutcome::kProofRefused) {
        // The cause's message starts with the rule: "<rule>: ...".
        std::string rule = "unknown";
        for (const cloud::StatusCause& c : cloud::CausesOf(rv.status())) {
          if (c.field == "spec.proof") rule = c.message.substr(0, c.message.find(':'));
        }
        absl::MutexLock lock(&mu_);
        ++proof_refusals_[rule];
      }
      if (!rv.ok()) {
        LogLimited(absl::StrCat("agent-write-", DelegationOutcomeName(outcome)), 'W',
                   absl::StrCat("DelegatedLease ", a.node, ": ", rv.status().message()));
      }
      break;
    }
    case Kind::kDelete: {
      status = cloud_->DeleteDelegatedLease(a.node, a.resource_version);
      outcome = OutcomeFromStatus(status);
      break;
    }
  }
  const int64_t now = clock_->MonotonicMicros();
  if (planner_.OnResult(a, outcome, version, now)) {
    // 403: the server says we do not lead. Stop writing. When another member
    // may hold the term, step down and let it lead before we campaign again;
    // when the server says the PoolLease is ours to take (gone with a server
    // that restarted on its memory store, unheld, or expired with nobody
    // taking it), nobody else leads and every cut-off member is undelegated
    // until someone does: campaign again at once, as client-go's elector
    // would on its next retry. A server that keeps refusing so costs at most
    // one campaign per member heartbeat: a new term writes only heartbeats
    // that arrive after it began.
    const bool lapsed = outcome == DelegationOutcome::kTermLapsed;
    base::LogWarning(absl::StrCat(
        "the server refused a DelegatedLease write of ", a.node,
        lapsed ? " (the PoolLease is free to take): campaigning again at once"
               : " (forbidden): stepping down",
        ": ", cloud::MessageOf(status)));
    pending_.clear();
    {
      absl::MutexLock lock(&mu_);
      leading_ = false;
    }
    elector_->Cancel();
    if (lapsed) {
      // The next cloud step campaigns.
      elector_->Restart();
      next_elector_us_ = now;
    } else {
      campaign_after_us_ = now + options_.step_down_backoff_us;
    }
  }
}

void AgentCore::Delegate(int64_t now) {
  const int64_t budget_end = now + options_.delegation_budget_us;
  while (planner_.leading()) {
    if (pending_.empty()) {
      absl::MutexLock lock(&mu_);
      const int64_t plan_now = clock_->MonotonicMicros();
      const std::optional<std::set<std::string>> usable = UsableChallenges(plan_now);
      auto actions = planner_.Plan(peers_, *pool_, plan_now, usable ? &*usable : nullptr);
      pending_.assign(std::make_move_iterator(actions.begin()), std::make_move_iterator(actions.end()));
    }
    if (pending_.empty()) return;
    DelegationAction a = std::move(pending_.front());
    pending_.pop_front();
    const bool write =
        a.kind == DelegationAction::Kind::kCreate || a.kind == DelegationAction::Kind::kUpdate;
    if (write && clock_->MonotonicMicros() >= a.evidence_deadline_mono_us) {
      planner_.OnResult(a, DelegationOutcome::kSkipped, "", clock_->MonotonicMicros());
      continue;
    }
    Execute(a);
    if (clock_->MonotonicMicros() >= budget_end) return;
  }
}

void AgentCore::Forge() {
  LeaderView view;
  {
    absl::MutexLock lock(&mu_);
    view.identity = identity_;
    view.pool = pool_;
    for (const auto& [node, address] : pool_->members) {
      if (auto hb = peers_.Latest(node)) view.latest[node] = std::move(hb);
    }
    view.heard = heard_;
    view.server_challenge = server_challenge_;
  }
  view.now_mono_us = clock_->MonotonicMicros();
  view.now_wall_us = clock_->NowMicros();
  view.lease_duration_seconds = options_.delegation.lease_duration_seconds;
  view.freshness = options_.freshness;
  options_.forger->Step(cloud_, view);
}

int64_t AgentCore::CloudStep() {
  if (cloud_ == nullptr) return kNever;
  int64_t now = clock_->MonotonicMicros();
  if (now >= next_probe_us_) Probe(now);
  now = clock_->MonotonicMicros();
  Campaign(now);
  if (planner_.leading()) Delegate(clock_->MonotonicMicros());
  if (planner_.leading() && options_.forger != nullptr) Forge();
  UpdateWatched();

  now = clock_->MonotonicMicros();
  int64_t next = next_probe_us_;
  using Phase = election::LeaderElector::Phase;
  if (elector_->phase() != Phase::kStopped) next = std::min(next, next_elector_us_);
  if (elector_->phase() == Phase::kStopped && campaign_after_us_ > now) {
    next = std::min(next, campaign_after_us_);
  }
  // Work left over from the budget, or new evidence to act on soon.
  if (planner_.leading()) next = std::min(next, now + (pending_.empty() ? 200'000 : 0));
  // The moment "reachable" lapses without an answer.
  if (reachability_.Reachable(now)) {
    next = std::min(next, now + options_.reachability.probe_period_us +
                              options_.reachability.request_timeout_us);
  }
  return std::max(next, now);
}

void AgentCore::Shutdown() {
  if (elector_ == nullptr) return;
  planner_.StopLeading();
  pending_.clear();
  elector_->Cancel();
}

}  // namespace poolcoord::agent
