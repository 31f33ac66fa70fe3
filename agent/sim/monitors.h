// The invariant monitors of poolcoord-sim, shared by its two modes (the
// integration run against a server process, fleet.cc, and the deterministic
// simulation, world.cc): what the cloud and the server's answers say, judged
// without an oracle (agent/sim/README.md "What it measures").
//
// - TermLedger: terms from the agents' own PoolLease write responses, and the
//   DelegatedLease writes the server accepted, each with the term the server
//   stamped on it; Check() finds writes outside their writer's term, one term
//   with two writers, stale terms, writes without a term, and one term handed
//   to two holders.
// - LeaderBeliefs: who believes it leads (between OnStartedLeading and
//   OnStoppedLeading) and in which term; two believers of one term fail the
//   run, a deposed leader still believing while a newer term leads is
//   client-go's normal lack of fencing (reported); failover times after kills.
// - EvictionVerdict: a node the node lifecycle controller would mark Unknown
//   (its cloud Lease's renewTime has not grown for a grace period) while it
//   was alive is a false eviction, unless its whole pool was cut off or no
//   member of its pool reached the cloud (counted apart).
// - FalseLiveness: a DelegatedLease accepted after its node's death, or its
//   cloud Lease renewed later than a live delegation could explain.
//
// Times are µs on the run's monotonic clock; `start` only names them in
// messages (seconds since the run began). Node and pool ids index the
// Roster. Thread-safety: every class is thread-safe (one mutex each).
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace poolcoord::sim {

inline constexpr int64_t kNever = INT64_MAX;

// Who is who: node i's name and pool, pool p's name and members.
struct Roster {
  std::vector<std::string> nodes;
  std::vector<int> pool_of;
  std::vector<std::string> pools;
  std::vector<std::vector<int>> members;
  int64_t start = 0;  // the run's start, for messages
  double Rel(int64_t t) const { return (t - start) / 1e6; }
};

// One leader term: a PoolLease object (metadata.uid) at one
// spec.leaseTransitions, as the server stamps it into a DelegatedLease's
// status.leaderTerm.
struct Term {
  std::string uid;
  int transitions = -1;  // -1: none
  bool known() const { return transitions >= 0; }
  bool operator==(const Term&) const = default;
  bool operator<(const Term& o) const {
    return std::tie(uid, transitions) < std::tie(o.uid, o.transitions);
  }
  std::string ToString() const {
    return known() ? absl::StrCat("(", uid.substr(0, 8), ",", transitions, ")") : "(none)";
  }
};

// What a write response says about the stored object.
struct Stored {
  std::string rv, uid, holder;
  int transitions = 0;
  Term leader_term;           // DelegatedLease status.leaderTerm
  int64_t observed_wall = 0;  // status.observedTime, wall µs; 0 when absent
};
absl::StatusOr<Stored> ParseStored(std::string_view body);

// An accepted DelegatedLease write, from its response.
struct DlWrite {
  int pool;
  int writer;  // node id
  int node;    // node id of the node written for
  int64_t sent;
  int64_t done;
  int64_t hb;  // when the heartbeat it rests on arrived at the writer
  int64_t observed_wall;
  Term term;  // status.leaderTerm of the stored object
};

class TermLedger {
 public:
  explicit TermLedger(const Roster* roster) : roster_(roster) {}

  // A successful PoolLease write (create, takeover or renewal) by `node`,
  // answered at `done` with the stored object `body`. Returns the term when
  // `node` holds it (the term the node now leads or renews).
  std::optional<Term> RecordLeaseWrite(int node, std::string_view body, int64_t done);
  // A DelegatedLease write by `writer` for `node` that the server accepted
  // with `body`.
  void RecordDelegatedWrite(int writer, int node, int64_t sent, int64_t done, int64_t hb,
                            std::string_view body);
  void AddWrite(DlWrite w);  // the self-test's hand-made history

  struct Report {
    int64_t writes = 0, terms = 0;
    int64_t other_term = 0;    // written in a term acquired by someone else
    int64_t shared_term = 0;   // two writers, one term
    int64_t stale_term = 0;    // older than a term acquired before the write left
    int64_t no_term = 0;       // accepted without status.leaderTerm
    int64_t unknown_term = 0;  // a term no response named (report only)
    int64_t term_conflicts = 0, unparsed = 0;
    std::vector<std::string> details;
    int64_t violations() const {
      return other_term + shared_term + stale_term + no_term + term_conflicts;
    }
  };
  Report Check() const;
  std::vector<DlWrite> Writes() const;

 private:
  struct Entry {
    int acquirer;
    int64_t first_done;  // the first response naming this term
  };
  const Roster* const roster_;
  mutable absl::Mutex mu_;
  std::map<std::pair<int, Term>, Entry> ledger_ ABSL_GUARDED_BY(mu_);
  std::vector<DlWrite> writes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> incidents_ ABSL_GUARDED_BY(mu_);
  int64_t term_conflicts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t unparsed_ ABSL_GUARDED_BY(mu_) = 0;
};

class LeaderBeliefs {
 public:
  explicit LeaderBeliefs(const Roster* roster);

  // `node` began believing it leads `term` at `now`.
  void Started(int node, const Term& term, int64_t now);
  // ... and stopped (a no-op when it did not believe).
  void Stopped(int node, int64_t now);
  bool Believes(int node) const;
  int Believers(int pool) const;
  bool EverLed(int pool) const;
  // A leader of `pool` was killed: the next start in that pool is its failover.
  void NoteKill(int pool, int64_t now);
  int PendingKills() const;

  int64_t overlaps() const;
  int64_t same_term_overlaps() const;  // two believers of one term: impossible
  int64_t max_overlap_us() const;      // two beliefs of different terms overlapping
  std::vector<int64_t> failovers() const;
  std::vector<std::string> incidents() const;

 private:
  const Roster* const roster_;
  mutable absl::Mutex mu_;
  struct Belief {
    bool believes = false;
    int64_t since = 0;
    Term term;
  };
  std::vector<Belief> beliefs_ ABSL_GUARDED_BY(mu_);
  std::vector<int> believers_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> ever_led_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> kill_at_ ABSL_GUARDED_BY(mu_);
  int64_t overlaps_ ABSL_GUARDED_BY(mu_) = 0, same_term_ ABSL_GUARDED_BY(mu_) = 0,
          max_overlap_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> failovers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> incidents_ ABSL_GUARDED_BY(mu_);
};

// Why an alive node's cloud Lease was too old without poolcoord to blame.
enum class Apart {
  kNone,
  kWholePool,  // its whole pool was cut off (nobody in the cloud can tell from death)
  kUncovered,  // no alive member of its pool reached the cloud since
};
// `last`: the node's last sign of life in the cloud; the pool's whole-pool
// cut [cut_from, cut_until) and the last time no member of it was in reach.
Apart Classify(int64_t now, int64_t last, int64_t pool_cut_from, int64_t pool_cut_until,
               int64_t pool_last_uncovered);

class EvictionVerdict {
 public:
  EvictionVerdict(const Roster* roster, std::vector<double> graces_s);

  // Alive node `node`'s cloud Lease, last counted as a sign of life at
  // `last`, has reached grace period `grace` (an index into graces_s) at
  // `now`: the node lifecycle controller marks it Unknown. Each `last` is
  // judged once per grace. `connected`: the node itself reached the cloud.
  void Unknown(int node, size_t grace, int64_t now, int64_t last, Apart apart, bool connected);
  // The oldest cloud Lease of an alive node in reach (not apart), for the report.
  void ObserveAge(int64_t age_us);
  // Whether the verdict for (node, grace) at `last` is still to come.
  bool Judged(int node, size_t grace, int64_t last) const;

  // What a look at one node finds: whether it is alive, whether it reaches the
  // cloud, and its cloud Lease's last sign of life (0: none yet).
  struct NodeLook {
    bool alive = false;
    bool connected = false;
    int64_t last_change = 0;
  };
  // Once a second in both modes: notes the pools no alive member reaches the
  // cloud from, then judges each alive node's last sign of life (the run's
  // start at the earliest) against every grace period, with Unknown() and
  // ObserveAge(). `pool_cut(p)`: pool p's whole-pool cut [from, until) (kNever
  // when none). Returns the (node, grace index) pairs newly judged Unknown.
  std::vector<std::pair<int, size_t>> Look(
      int64_t now, const std::function<NodeLook(int)>& node,
      const std::function<std::pair<int64_t, int64_t>(int)>& pool_cut);

  const std::vector<double>& graces_s() const { return graces_s_; }
  std::vector<int64_t> false_evictions() const;
  std::vector<int64_t> wholepool_gaps() const;
  std::vector<int64_t> uncovered_gaps() const;
  int64_t max_alive_age_us() const;
  std::vector<std::string> incidents() const;

 private:
  const Roster* const roster_;
  const std::vector<double> graces_s_;
  mutable absl::Mutex mu_;
  std::vector<std::vector<int64_t>> counted_ ABSL_GUARDED_BY(mu_);  // [node][grace]: `last` judged
  std::vector<int64_t> false_evictions_ ABSL_GUARDED_BY(mu_), wholepool_ ABSL_GUARDED_BY(mu_),
      uncovered_ ABSL_GUARDED_BY(mu_);
  int64_t max_alive_age_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> incidents_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> last_uncovered_ ABSL_GUARDED_BY(mu_);  // by pool
};

// False liveness, twice: (1) an accepted DelegatedLease write that left more
// than `fresh_us` (the agents' freshness bound) after its node's death: its
// evidence cannot be fresh; (2) a dead node's cloud Lease renewed (renewTime
// grew) later than its death + `allowance_us` (what a forwarder acting on a
// live DelegatedLease may still do). `death[i]`: node i's death (kNever:
// alive); `changes[i]`: its cloud Lease's signs of life.
struct FalseLivenessReport {
  int64_t writes = 0;  // (1)
  int64_t cloud = 0;   // (2)
  std::vector<std::string> details;
};
FalseLivenessReport FalseLiveness(const Roster& roster, const std::vector<DlWrite>& writes,
                                  const std::vector<int64_t>& death,
                                  const std::vector<std::vector<int64_t>>& changes, int64_t fresh_us,
                                  int64_t allowance_us, int64_t end);

}  // namespace poolcoord::sim
