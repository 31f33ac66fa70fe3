#include "agent/sim/monitors.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_format.h"
#include "base/microtime.h"
#include "rapidjson/document.h"

namespace poolcoord::sim {

namespace {
constexpr size_t kMaxIncidents = 50;
constexpr size_t kMaxTermIncidents = 20;
constexpr size_t kMaxDetails = 30;
}  // namespace

absl::StatusOr<Stored> ParseStored(std::string_view body) {
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  if (d.HasParseError() || !d.IsObject()) return absl::InvalidArgumentError("not a JSON object");
  auto obj = [](const rapidjson::Value& v, const char* k) -> const rapidjson::Value* {
    if (!v.IsObject()) return nullptr;
    auto it = v.FindMember(k);
    return it == v.MemberEnd() || !it->value.IsObject() ? nullptr : &it->value;
  };
  auto str = [](const rapidjson::Value* v, const char* k) -> std::string {
    if (v == nullptr) return "";
    auto it = v->FindMember(k);
    return it == v->MemberEnd() || !it->value.IsString() ? "" : it->value.GetString();
  };
  auto integer = [](const rapidjson::Value* v, const char* k, int dflt) -> int {
    if (v == nullptr) return dflt;
    auto it = v->FindMember(k);
    return it == v->MemberEnd() || !it->value.IsInt() ? dflt : it->value.GetInt();
  };
  Stored s;
  const rapidjson::Value* md = obj(d, "metadata");
  const rapidjson::Value* spec = obj(d, "spec");
  const rapidjson::Value* status = obj(d, "status");
  s.rv = str(md, "resourceVersion");
  s.uid = str(md, "uid");
  s.holder = str(spec, "holderIdentity");
  s.transitions = integer(spec, "leaseTransitions", 0);
  if (const rapidjson::Value* lt = status ? obj(*status, "leaderTerm") : nullptr) {
    s.leader_term.uid = str(lt, "poolLeaseUID");
    s.leader_term.transitions = integer(lt, "leaseTransitions", 0);
  }
  if (std::string t = str(status, "observedTime"); !t.empty()) {
    if (auto w = base::ParseMicroTime(t); w.ok()) s.observed_wall = *w;
  }
  return s;
}

// ------------------------------------------------------------------ terms --

std::optional<Term> TermLedger::RecordLeaseWrite(int node, std::string_view body, int64_t done) {
  auto st = ParseStored(body);
  const int pool = roster_->pool_of[node];
  absl::MutexLock l(&mu_);
  if (!st.ok() || st->uid.empty()) {
    ++unparsed_;
    return std::nullopt;
  }
  if (st->holder.empty()) return std::nullopt;  // a release names no acquirer
  const Term t{st->uid, st->transitions};
  if (st->holder != roster_->nodes[node]) {
    ++term_conflicts_;
    if (incidents_.size() < kMaxTermIncidents) {
      incidents_.push_back(absl::StrFormat("%s wrote PoolLease %s but the stored holder is %s (term %s)",
                                           roster_->nodes[node], roster_->pools[pool], st->holder,
                                           t.ToString()));
    }
    return std::nullopt;
  }
  auto [it, inserted] = ledger_.try_emplace({pool, t}, Entry{node, done});
  if (inserted) return t;
  it->second.first_done = std::min(it->second.first_done, done);
  if (it->second.acquirer != node) {
    ++term_conflicts_;
    if (incidents_.size() < kMaxTermIncidents) {
      incidents_.push_back(absl::StrFormat("term %s of %s returned to two holders: %s and %s",
                                           t.ToString(), roster_->pools[pool],
                                           roster_->nodes[it->second.acquirer], roster_->nodes[node]));
    }
  }
  return t;
}

void TermLedger::RecordDelegatedWrite(int writer, int node, int64_t sent, int64_t done, int64_t hb,
                                      std::string_view body) {
  auto st = ParseStored(body);
  absl::MutexLock l(&mu_);
  if (!st.ok()) {
    ++unparsed_;
    return;
  }
  writes_.push_back(
      {roster_->pool_of[writer], writer, node, sent, done, hb, st->observed_wall, st->leader_term});
}

void TermLedger::AddWrite(DlWrite w) {
  absl::MutexLock l(&mu_);
  writes_.push_back(std::move(w));
}

std::vector<DlWrite> TermLedger::Writes() const {
  absl::MutexLock l(&mu_);
  return writes_;
}

TermLedger::Report TermLedger::Check() const {
  absl::MutexLock l(&mu_);
  Report r;
  r.writes = static_cast<int64_t>(writes_.size());
  r.terms = static_cast<int64_t>(ledger_.size());
  r.term_conflicts = term_conflicts_;
  r.unparsed = unparsed_;
  r.details = incidents_;
  auto detail = [&](std::string s) {
    if (r.details.size() < kMaxDetails) r.details.push_back(std::move(s));
  };
  const Roster& n = *roster_;
  // Per PoolLease object, the acquisitions in the order their first answer
  // came, each with the highest leaseTransitions acquired by then.
  std::map<std::pair<int, std::string>, std::vector<std::pair<int64_t, int>>> acquired;
  for (const auto& [key, e] : ledger_) {
    acquired[{key.first, key.second.uid}].emplace_back(e.first_done, key.second.transitions);
  }
  for (auto& [k, v] : acquired) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i) v[i].second = std::max(v[i].second, v[i - 1].second);
  }
  std::map<std::pair<int, Term>, int> writer_of;
  for (const DlWrite& w : writes_) {
    const std::string& pool = n.pools[w.pool];
    const std::string& writer = n.nodes[w.writer];
    if (!w.term.known()) {
      ++r.no_term;
      detail(absl::StrFormat("%s: write by %s for %s accepted without status.leaderTerm", pool, writer,
                             n.nodes[w.node]));
      continue;
    }
    auto [it, inserted] = writer_of.try_emplace({w.pool, w.term}, w.writer);
    if (!inserted && it->second != w.writer) {
      ++r.shared_term;
      detail(absl::StrFormat("%s: term %s carried by writes of %s and %s", pool, w.term.ToString(),
                             n.nodes[it->second], writer));
    }
    auto e = ledger_.find({w.pool, w.term});
    if (e == ledger_.end()) {
      ++r.unknown_term;
    } else if (e->second.acquirer != w.writer) {
      ++r.other_term;
      detail(absl::StrFormat("t=%.1fs %s: %s wrote %s in term %s, acquired by %s", n.Rel(w.sent), pool,
                             writer, n.nodes[w.node], w.term.ToString(), n.nodes[e->second.acquirer]));
    }
    auto acq = acquired.find({w.pool, w.term.uid});
    if (acq == acquired.end()) continue;
    auto pos = std::lower_bound(acq->second.begin(), acq->second.end(), std::make_pair(w.sent, INT_MIN));
    if (pos == acq->second.begin()) continue;
    const int newest = std::prev(pos)->second;
    if (newest > w.term.transitions) {
      ++r.stale_term;
      detail(absl::StrFormat(
          "t=%.1fs %s: %s's write for %s sent after term (%s,%d) was acquired, yet accepted in older "
          "term %s",
          n.Rel(w.sent), pool, writer, n.nodes[w.node], w.term.uid.substr(0, 8), newest,
          w.term.ToString()));
    }
  }
  return r;
}

// ---------------------------------------------------------------- beliefs --

LeaderBeliefs::LeaderBeliefs(const Roster* roster)
    : roster_(roster),
      beliefs_(roster->nodes.size()),
      believers_(roster->pools.size(), 0),
      ever_led_(roster->pools.size(), false),
      kill_at_(roster->pools.size(), 0) {}

// Beliefs are judged by term: client-go has no fencing, so a deposed leader
// that is ticked late may still believe while its successor leads a newer
// term (the server fences its writes; the term checks verify that). Two
// believers of the same term would mean the server gave one term to two
// acquirers.
void LeaderBeliefs::Started(int node, const Term& term, int64_t now) {
  const int pool = roster_->pool_of[node];
  absl::MutexLock l(&mu_);
  Belief& a = beliefs_[node];
  if (a.believes) return;
  a.believes = true;
  a.since = now;
  a.term = term;
  for (int id : roster_->members[pool]) {
    const Belief& b = beliefs_[id];
    if (id == node || !b.believes) continue;
    const bool same = b.term == a.term;
    ++(same ? same_term_ : overlaps_);
    if (incidents_.size() < kMaxIncidents) {
      incidents_.push_back(absl::StrFormat(
          "t=%.1fs %s: %s starts leading term %s while %s still believes it leads term %s%s",
          roster_->Rel(now), roster_->pools[pool], roster_->nodes[node], a.term.ToString(),
          roster_->nodes[id], b.term.ToString(),
          same ? " (SAME TERM)" : " (deposed, fenced by the server)"));
    }
  }
  ++believers_[pool];
  ever_led_[pool] = true;
  if (kill_at_[pool] != 0) {
    failovers_.push_back(now - kill_at_[pool]);
    kill_at_[pool] = 0;
  }
}

void LeaderBeliefs::Stopped(int node, int64_t now) {
  const int pool = roster_->pool_of[node];
  absl::MutexLock l(&mu_);
  Belief& a = beliefs_[node];
  if (!a.believes) return;
  a.believes = false;
  --believers_[pool];
  for (int id : roster_->members[pool]) {
    const Belief& b = beliefs_[id];
    if (id == node || !b.believes) continue;
    max_overlap_ = std::max(max_overlap_, now - std::max(a.since, b.since));
  }
}

bool LeaderBeliefs::Believes(int node) const {
  absl::MutexLock l(&mu_);
  return beliefs_[node].believes;
}
int LeaderBeliefs::Believers(int pool) const {
  absl::MutexLock l(&mu_);
  return believers_[pool];
}
bool LeaderBeliefs::EverLed(int pool) const {
  absl::MutexLock l(&mu_);
  return ever_led_[pool];
}
void LeaderBeliefs::NoteKill(int pool, int64_t now) {
  absl::MutexLock l(&mu_);
  kill_at_[pool] = now;
}
int LeaderBeliefs::PendingKills() const {
  absl::MutexLock l(&mu_);
  int n = 0;
  for (int64_t k : kill_at_) n += k != 0 ? 1 : 0;
  return n;
}
int64_t LeaderBeliefs::overlaps() const {
  absl::MutexLock l(&mu_);
  return overlaps_;
}
int64_t LeaderBeliefs::same_term_overlaps() const {
  absl::MutexLock l(&mu_);
  return same_term_;
}
int64_t LeaderBeliefs::max_overlap_us() const {
  absl::MutexLock l(&mu_);
  return max_overlap_;
}
std::vector<int64_t> LeaderBeliefs::failovers() const {
  absl::MutexLock l(&mu_);
  return failovers_;
}
std::vector<std::string> LeaderBeliefs::incidents() const {
  absl::MutexLock l(&mu_);
  return incidents_;
}

// -------------------------------------------------------------- evictions --

Apart Classify(int64_t now, int64_t last, int64_t pool_cut_from, int64_t pool_cut_until,
               int64_t pool_last_uncovered) {
  if (pool_cut_from != kNever && pool_cut_from <= now && pool_cut_until > last) return Apart::kWholePool;
  if (pool_last_uncovered >= last) return Apart::kUncovered;
  return Apart::kNone;
}

EvictionVerdict::EvictionVerdict(const Roster* roster, std::vector<double> graces_s)
    : roster_(roster),
      graces_s_(std::move(graces_s)),
      counted_(roster->nodes.size(), std::vector<int64_t>(graces_s_.size(), -1)),
      false_evictions_(graces_s_.size(), 0),
      wholepool_(graces_s_.size(), 0),
      uncovered_(graces_s_.size(), 0),
      last_uncovered_(roster->pools.size(), 0) {}

std::vector<std::pair<int, size_t>> EvictionVerdict::Look(
    int64_t now, const std::function<NodeLook(int)>& node,
    const std::function<std::pair<int64_t, int64_t>(int)>& pool_cut) {
  std::vector<NodeLook> looks(roster_->nodes.size());
  for (size_t i = 0; i < looks.size(); ++i) looks[i] = node(static_cast<int>(i));
  std::vector<int64_t> last_uncovered;
  {
    absl::MutexLock l(&mu_);
    for (size_t p = 0; p < roster_->members.size(); ++p) {
      bool covered = false;
      for (int id : roster_->members[p]) covered = covered || (looks[id].alive && looks[id].connected);
      if (!covered) last_uncovered_[p] = now;
    }
    last_uncovered = last_uncovered_;
  }
  std::vector<std::pair<int, size_t>> unknown;
  for (size_t i = 0; i < looks.size(); ++i) {
    const NodeLook& n = looks[i];
    if (!n.alive) continue;
    const int pool = roster_->pool_of[i];
    const int64_t last = std::max(roster_->start, n.last_change);
    const int64_t age = now - last;
    const auto [cut_from, cut_until] = pool_cut(pool);
    const Apart apart = Classify(now, last, cut_from, cut_until, last_uncovered[pool]);
    if (apart == Apart::kNone) ObserveAge(age);
    for (size_t g = 0; g < graces_s_.size(); ++g) {
      if (age < static_cast<int64_t>(graces_s_[g] * 1e6) || Judged(static_cast<int>(i), g, last)) continue;
      Unknown(static_cast<int>(i), g, now, last, apart, n.connected);
      unknown.emplace_back(static_cast<int>(i), g);
    }
  }
  return unknown;
}

bool EvictionVerdict::Judged(int node, size_t grace, int64_t last) const {
  absl::MutexLock l(&mu_);
  return counted_[node][grace] == last;
}

void EvictionVerdict::Unknown(int node, size_t grace, int64_t now, int64_t last, Apart apart,
                              bool connected) {
  absl::MutexLock l(&mu_);
  if (counted_[node][grace] == last) return;
  counted_[node][grace] = last;
  switch (apart) {
    case Apart::kWholePool:
      ++wholepool_[grace];
      return;
    case Apart::kUncovered:
      ++uncovered_[grace];
      return;
    case Apart::kNone:
      break;
  }
  ++false_evictions_[grace];
  if (incidents_.size() < kMaxIncidents) {
    incidents_.push_back(absl::StrFormat(
        "t=%.1fs %s (pool %s, %s): cloud Lease %.1fs old, past the %.0fs grace period",
        roster_->Rel(now), roster_->nodes[node], roster_->pools[roster_->pool_of[node]],
        connected ? "connected" : "cut off", (now - last) / 1e6, graces_s_[grace]));
  }
}

void EvictionVerdict::ObserveAge(int64_t age_us) {
  absl::MutexLock l(&mu_);
  max_alive_age_ = std::max(max_alive_age_, age_us);
}

std::vector<int64_t> EvictionVerdict::false_evictions() const {
  absl::MutexLock l(&mu_);
  return false_evictions_;
}
std::vector<int64_t> EvictionVerdict::wholepool_gaps() const {
  absl::MutexLock l(&mu_);
  return wholepool_;
}
std::vector<int64_t> EvictionVerdict::uncovered_gaps() const {
  absl::MutexLock l(&mu_);
  return uncovered_;
}
int64_t EvictionVerdict::max_alive_age_us() const {
  absl::MutexLock l(&mu_);
  return max_alive_age_;
}
std::vector<std::string> EvictionVerdict::incidents() const {
  absl::MutexLock l(&mu_);
  return incidents_;
}

// --------------------------------------------------------- false liveness --

FalseLivenessReport FalseLiveness(const Roster& roster, const std::vector<DlWrite>& writes,
                                  const std::vector<int64_t>& death,
                                  const std::vector<std::vector<int64_t>>& changes, int64_t fresh_us,
                                  int64_t allowance_us, int64_t end) {
  FalseLivenessReport r;
  for (const DlWrite& w : writes) {
    const int64_t d = death[w.node];
    if (d != kNever && w.sent > d + fresh_us) {
      ++r.writes;
      r.details.push_back(absl::StrFormat("t=%.1fs %s's DelegatedLease written by %s %.1fs after its death",
                                          roster.Rel(w.sent), roster.nodes[w.node],
                                          roster.nodes[w.writer], (w.sent - d) / 1e6));
    }
  }
  for (size_t i = 0; i < death.size(); ++i) {
    const int64_t d = death[i];
    if (d == kNever || d > end) continue;
    for (int64_t t : changes[i]) {
      if (t > d + allowance_us) {
        ++r.cloud;
        r.details.push_back(absl::StrFormat("t=%.1fs %s's cloud Lease renewed %.1fs after its death",
                                            roster.Rel(t), roster.nodes[i], (t - d) / 1e6));
        break;
      }
    }
  }
  return r;
}

}  // namespace poolcoord::sim
