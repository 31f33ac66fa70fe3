#include "controllers/forwarder_shards.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "cloud/errors.h"

namespace poolcoord::controllers {
namespace {

// A Lease name from an identity: a DNS-1123 subdomain (lower case letters,
// digits, '-' and '.'), as object names must be.
std::string NamePart(const std::string& identity) {
  std::string out;
  for (char c : identity) {
    c = absl::ascii_tolower(c);
    out += (absl::ascii_isalnum(c) || c == '-' || c == '.') ? c : '-';
  }
  return out.substr(0, 200);
}

uint64_t Mix(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The rendezvous weight of `replica` for `shard` (FNV-1a of both, then a
// finaliser so that names differing in one letter spread apart).
uint64_t Weight(int shard, const std::string& replica) {
  uint64_t h = Mix(14695981039346656037ull, replica);
  h = Mix(h, absl::StrCat("/", shard));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

}  // namespace

std::vector<int> ForwarderShards::Assign(std::vector<std::string> replicas, const std::string& me,
                                         int shards) {
  replicas.push_back(me);
  std::sort(replicas.begin(), replicas.end());
  replicas.erase(std::unique(replicas.begin(), replicas.end()), replicas.end());
  const size_t cap = (shards + replicas.size() - 1) / replicas.size();
  std::map<std::string, size_t> held;
  std::vector<int> mine;
  for (int s = 0; s < shards; ++s) {
    std::vector<std::string> ranked = replicas;
    std::sort(ranked.begin(), ranked.end(), [s](const std::string& a, const std::string& b) {
      const uint64_t wa = Weight(s, a), wb = Weight(s, b);
      return wa != wb ? wa > wb : a < b;
    });
    for (const std::string& r : ranked) {
      if (held[r] < cap) {
        ++held[r];
        if (r == me) mine.push_back(s);
        break;
      }
    }
  }
  return mine;
}

absl::StatusOr<std::unique_ptr<ForwarderShards>> ForwarderShards::New(
    cloud::LeaseInterface* leases, const base::Clock* clock, base::MetricsRegistry* metrics,
    ForwarderShardsOptions options, ShardTarget target) {
  if (options.shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("forwarder shards must be at least 1, got ", options.shards));
  }
  if (options.identity.empty()) return absl::InvalidArgumentError("empty replica identity");
  absl::Status timings = election::LeaderElector::ValidateTimings(
      options.lease_duration, options.renew_deadline, options.retry_period);
  if (!timings.ok()) return timings;
  std::unique_ptr<ForwarderShards> s(
      new ForwarderShards(leases, clock, metrics, std::move(options), std::move(target)));
  absl::Status st = s->Init();
  if (!st.ok()) return st;
  return s;
}

ForwarderShards::ForwarderShards(cloud::LeaseInterface* leases, const base::Clock* clock,
                                 base::MetricsRegistry* metrics, ForwarderShardsOptions options,
                                 ShardTarget target)
    : leases_(leases),
      clock_(clock),
      metrics_(metrics),
      options_(std::move(options)),
      target_(std::move(target)),
      assigned_(options_.shards, false),
      held_(options_.shards, false) {}

ForwarderShards::~ForwarderShards() { Stop(); }

absl::Status ForwarderShards::Init() {
  // client-go's leaderelection metric, one series per Lease: 1 while held.
  auto& master = metrics_->AddGauge("leader_election_master_status",
                                    "1 while this replica holds the Lease: a forwarding shard "
                                    "(<name>-shard-<i>) it forwards, or its presence.",
                                    {"name"});
  auto config = [&](const std::string& lease) {
    election::LeaderElectionConfig c;
    c.lease_duration = options_.lease_duration;
    c.renew_deadline = options_.renew_deadline;
    c.retry_period = options_.retry_period;
    c.release_on_cancel = true;
    c.tight_follower_polls = true;
    c.clock = clock_;
    c.name = lease;
    return c;
  };
  const std::string presence = absl::StrCat(options_.name, "-replica-", NamePart(options_.identity));
  presence_name_ = presence;
  presence_lock_ = std::make_unique<election::ResourceLeaseLock>(leases_, "leases", presence,
                                                                 options_.identity);
  election::LeaderElectionConfig pc = config(presence);
  pc.lock = presence_lock_.get();
  base::Gauge* presence_status = &master.WithLabels({presence});
  pc.callbacks.on_started_leading = [presence_status] { presence_status->Set(1); };
  pc.callbacks.on_stopped_leading = [presence_status] { presence_status->Set(0); };
  auto p = election::LeaderElector::New(pc);
  if (!p.ok()) return p.status();
  presence_ = *std::move(p);
  for (int i = 0; i < options_.shards; ++i) {
    const std::string lease = absl::StrCat(options_.name, "-shard-", i);
    locks_.push_back(std::make_unique<election::ResourceLeaseLock>(leases_, "leases", lease,
                                                                   options_.identity));
    election::LeaderElectionConfig c = config(lease);
    c.lock = locks_.back().get();
    c.may_acquire = [this, i] {
      absl::MutexLock l(&mu_);
      return assigned_[i] && !stopping_;
    };
    base::Gauge* status = &master.WithLabels({lease});
    status->Set(0);
    c.callbacks.on_started_leading = [this, i, status] {
      {
        absl::MutexLock l(&mu_);
        held_[i] = true;
      }
      status->Set(1);
      target_.acquire(i);
    };
    c.callbacks.on_stopped_leading = [this, i, status] {
      target_.release(i);  // before the Lease is released: no overlap
      status->Set(0);
      absl::MutexLock l(&mu_);
      held_[i] = false;
    };
    auto e = election::LeaderElector::New(c);
    if (!e.ok()) return e.status();
    electors_.push_back(*std::move(e));
  }
  return absl::OkStatus();
}

void ForwarderShards::Survey() {
  const int64_t now = clock_->MonotonicMicros();
  absl::StatusOr<cloud::LeaseList> list = leases_->List(cloud::ListOptions{});
  if (!list.ok()) {
    // Keep the last assignment: not seeing the others is no evidence that
    // they are gone.
    base::LogWarning("forwarder shards: listing the replicas' Leases failed: ",
                     list.status().message());
    return;
  }
  const std::string prefix = absl::StrCat(options_.name, "-replica-");
  std::vector<std::string> live;
  std::set<std::string> listed;
  next_expiry_us_ = election::LeaderElector::kNever;
  const int64_t stale_us =
      absl::ToInt64Microseconds(options_.lease_duration) * options_.stale_presence_durations;
  for (const cloud::Lease& lease : list->items) {
    const std::string& name = lease.metadata.name;
    if (name.rfind(prefix, 0) != 0) continue;
    listed.insert(name);
    const std::string holder = lease.spec.holder_identity.value_or("");
    const std::string record =
        absl::StrCat(holder, "|", lease.spec.renew_time_us.value_or(0), "|",
                     lease.spec.lease_duration_seconds.value_or(0));
    Seen& seen = seen_[name];
    if (seen.record != record || seen.changed_us == 0) {
      seen = Seen{record, now, lease.spec.lease_duration_seconds.value_or(0), !holder.empty()};
    }
    if (holder == options_.identity) continue;  // ourselves: counted below
    const int64_t expiry = seen.changed_us + int64_t{seen.duration_s} * 1'000'000;
    if (seen.held && now < expiry) {
      live.push_back(holder);
      // Expiry is strict and a real clock's wake-up is late by a little.
      next_expiry_us_ = std::min(next_expiry_us_, expiry + election::LeaderElector::kExpiryPollDelayMicros);
    } else if (now - seen.changed_us > stale_us) {
      // A killed replica's presence: nobody renews it any more.
      absl::Status gone = leases_->Delete(name);
      if (!gone.ok() && !cloud::IsNotFound(gone)) {
        base::LogWarning("forwarder shards: deleting the stale presence Lease ", name, ": ",
                         gone.message());
      }
    }
  }
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = listed.count(it->first) ? std::next(it) : seen_.erase(it);
  }
  const std::vector<int> mine_now = Assign(live, options_.identity, options_.shards);
  absl::MutexLock l(&mu_);
  std::vector<bool> next(options_.shards, false);
  for (int s : mine_now) next[s] = true;
  if (next != assigned_) {
    base::LogInfo("forwarder shards: ", live.size() + 1, " live replica(s); ", options_.identity,
                  " is assigned ", mine_now.size(), " of ", options_.shards, " shards");
  }
  assigned_ = std::move(next);
}

int64_t ForwarderShards::Step() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return election::LeaderElector::kNever;
  }
  int64_t next = election::LeaderElector::kNever;
  if (presence_->phase() == election::LeaderElector::Phase::kStopped) presence_->Restart();
  next = std::min(next, presence_->Step());
  const int64_t now = clock_->MonotonicMicros();
  if (now >= std::min(next_survey_us_, next_expiry_us_)) {
    std::vector<bool> before;
    {
      absl::MutexLock l(&mu_);
      before = assigned_;
    }
    Survey();
    next_survey_us_ = now + absl::ToInt64Microseconds(options_.retry_period);
    std::vector<bool> after;
    {
      absl::MutexLock l(&mu_);
      after = assigned_;
    }
    // A shard newly ours (its holder gone, or handing it over) is polled now.
    for (int i = 0; i < options_.shards; ++i) {
      if (after[i] && !before[i]) electors_[i]->PollNow();
    }
  }
  next = std::min({next, next_survey_us_, next_expiry_us_});
  for (int i = 0; i < options_.shards; ++i) {
    election::LeaderElector& e = *electors_[i];
    bool assigned, held;
    {
      absl::MutexLock l(&mu_);
      assigned = assigned_[i];
      held = held_[i];
    }
    if (held && !assigned) {
      // Assigned to another replica: stop forwarding it, then release it
      // (both in Cancel), and go on watching its Lease.
      e.Cancel();
    }
    if (e.phase() == election::LeaderElector::Phase::kStopped) e.Restart();
    next = std::min(next, e.Step());
  }
  return next;
}

void ForwarderShards::Start() {
  thread_ = std::thread([this] {
    while (true) {
      const int64_t next = Step();
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      const int64_t wait = next - clock_->MonotonicMicros();
      if (wait > 0) wake_.WaitWithTimeout(&mu_, absl::Microseconds(std::min<int64_t>(wait, 1'000'000)));
    }
  });
}

void ForwarderShards::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  ReleaseAll();
}

void ForwarderShards::ReleaseAll() {
  for (auto& e : electors_) e->Cancel();
  if (presence_) {
    presence_->Cancel();
    absl::Status gone = leases_->Delete(presence_name_);
    if (!gone.ok() && !cloud::IsNotFound(gone)) {
      base::LogWarning("forwarder shards: deleting our presence Lease: ", gone.message());
    }
  }
}

std::vector<int> ForwarderShards::Held() const {
  absl::MutexLock l(&mu_);
  std::vector<int> out;
  for (int i = 0; i < options_.shards; ++i) {
    if (held_[i]) out.push_back(i);
  }
  return out;
}

std::vector<int> ForwarderShards::Assigned() const {
  absl::MutexLock l(&mu_);
  std::vector<int> out;
  for (int i = 0; i < options_.shards; ++i) {
    if (assigned_[i]) out.push_back(i);
  }
  return out;
}

bool ForwarderShards::Healthy(absl::Duration tolerance) const {
  for (int s : Held()) {
    if (!electors_[s]->Healthy(tolerance)) return false;
  }
  return true;
}

}  // namespace poolcoord::controllers
