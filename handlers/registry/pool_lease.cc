// PoolLease (poolleases, pl), cluster-scoped, named after its pool: the leader
// election of one node pool. Everything the API does with it is here (the map
// of a kind is in strategy.h):
//   fields     holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
//              leaseTransitions (coordination.k8s.io/v1 LeaseSpec; the row of
//              store/object.cc); status.observedTime and status.challenges
//              (the delegation challenges), server-written.
//   defaults   none: an unset field stays unset, as in a coordination.k8s.io
//              Lease. Status is the server's: dropped on create, kept on update
//              (LeaseStrategy, lease_strategy.h, as for every lease-shaped kind).
//   validation spec required (at the HTTP edge, as the schema says);
//              leaseDurationSeconds required, 1..--max-lease-duration;
//              leaseTransitions >= 0; the name a pool name
//              (election::PoolNameErrors: at most 63 characters); holderIdentity
//              empty or a node name (a DNS-1123 subdomain) (422, for every
//              writer, system:masters included). A pool without members in the
//              membership may have a PoolLease (system:masters create it before
//              labelling the nodes; only members can acquire it).
//   admission  election/'s PoolLease rules: members only, for themselves; takeover
//              only of a released or expired lease, leaseTransitions + 1; renewals
//              keep acquireTime and leaseTransitions (403/409/422/503);
//              renewTime is informational (no order, no bound); the server
//              stamps status.observedTime on a renewal or acquisition (a create, a
//              new renewTime or holderIdentity: election::RenewsLease). /status: system:masters only
//              (LeaseStrategy). Delete: the holder, any member once it is
//              not live.
//   columns    Holder, Transitions (-o wide), Renewed.
//   selectors  metadata.name, metadata.namespace only.
//   schema     PoolLeaseSpec, DelegationChallenge, PoolLeaseStatus, PoolLease
//              (below).
#include <span>
#include <string>
#include <vector>

#include "base/k8s_names.h"
#include "base/quote.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "handlers/openapi_schema.h"
#include "handlers/registry/lease_strategy.h"
#include "handlers/registry/strategy.h"
#include "handlers/table.h"

namespace poolcoord::handlers::registry {
namespace {

using openapi::ArrayRefProp;
using openapi::Definition;
using openapi::Int32Prop;
using openapi::KindDefinition;
using openapi::Meta;
using openapi::Ours;
using openapi::RefProp;
using openapi::StringProp;
using store::Object;

constexpr TableColumn kColumns[] = {
    {"Holder", "string", "",
     "spec.holderIdentity: the node that holds the pool lease (the pool leader).", 0},
    {"Transitions", "integer", "", "spec.leaseTransitions: how many times the lease changed "
                                   "holders.", 1},
    kRenewedColumn,
};

class PoolLeaseStrategy final : public LeaseStrategy {
 public:
  const store::ResourceInfo& Info() const override {
    return store::InfoFor(store::Kind::kPoolLease);
  }

  std::vector<store::FieldCause> Validate(const WriteContext& ctx,
                                          const Object& object) const override {
    std::vector<store::FieldCause> causes;
    // Required, as the schema says, also of a create with `"spec": null`: a
    // held lease without a duration could never expire on the server's clock,
    // and a release carries one too (client-go sends 1).
    ValidateLeaseDuration(object.spec, MaxLeaseDurationSeconds(ctx), /*required=*/true, causes);
    if (object.spec.lease_transitions && *object.spec.lease_transitions < 0) {
      causes.push_back(store::FieldInvalid("spec.leaseTransitions",
                                           std::to_string(*object.spec.lease_transitions),
                                           "must be greater than or equal to 0"));
    }
    // The name is the pool's, so the pool-name rule (a label value too: at most
    // 63 characters); ObjectMeta's validation has said what a subdomain lacks.
    const std::string& name = object.metadata.name;
    if (base::IsDNS1123Subdomain(name).empty()) {
      for (const std::string& msg : election::PoolNameErrors(name)) {
        causes.push_back(store::FieldInvalid("metadata.name", base::GoQuote(name), msg));
      }
    }
    // A node's name, as kube-apiserver's ValidateNodeName judges it; empty: released.
    if (const auto& holder = object.spec.holder_identity; holder && !holder->empty()) {
      for (const std::string& msg : base::IsDNS1123Subdomain(*holder)) {
        causes.push_back(store::FieldInvalid("spec.holderIdentity", base::GoQuote(*holder), msg));
      }
    }
    return causes;
  }

  absl::Status Admit(const WriteContext& ctx, const store::ObjectPtr& current, Object& proposed,
                     store::TxnReader&) const override {
    return ctx.rules->AdmitPoolLeaseWrite(ctx.user, current, proposed);
  }
  absl::Status AdmitDelete(const WriteContext& ctx, const Object& current,
                           store::TxnReader&) const override {
    return ctx.rules->AdmitPoolLeaseDelete(ctx.user, current);
  }

  std::span<const TableColumn> Columns() const override { return kColumns; }
  void WriteCells(store::JsonWriter& w, const Object& o, int64_t now_us) const override {
    WriteStringCell(w, o.spec.holder_identity);
    if (o.spec.lease_transitions) {
      w.Int(*o.spec.lease_transitions);
    } else {
      w.Null();  // kubectl prints <none>
    }
    WriteAgeCell(w, o.spec.renew_time_us, now_us);
  }

  std::vector<Definition> Definitions() const override {
    std::vector<Definition> d;
    d.push_back(
        {Ours("PoolLeaseSpec"),
         "PoolLeaseSpec is the desired state of a pool's leader lease; it mirrors "
         "coordination.k8s.io/v1 LeaseSpec, and clients drive it with client-go's LeaseLock "
         "algorithm.",
         "object",
         "",
         {StringProp(
              "holderIdentity",
              "The name of the node that holds the lease: the pool leader. Written by the "
              "acquiring node, only with its own name (or empty, to release), and only by a "
              "member of the pool named by metadata.name (403 Forbidden otherwise). Another "
              "member may take the lease only once it is released or expired; taking a live "
              "lease is 409 Conflict."),
          Int32Prop("leaseDurationSeconds",
                    "How long, in seconds, the lease stays valid after the server accepted the "
                    "holder's last renewal; candidates wait this long before taking over. From 1 "
                    "to the server's --max-lease-duration (default 300); 422 Invalid otherwise."),
          RefProp("acquireTime", Meta("MicroTime"),
                  "When the current holder acquired the lease, on the holder's clock (MicroTime: "
                  "RFC 3339 with exactly 6 fractional digits). Set on acquisition, kept by "
                  "renewals."),
          RefProp("renewTime", Meta("MicroTime"),
                  "When the holder last renewed, on the holder's clock (MicroTime). "
                  "Informational: the server judges expiry from its own time of the last "
                  "accepted renewal plus leaseDurationSeconds, never from this value."),
          Int32Prop("leaseTransitions",
                    "How many times the lease changed holders. An acquisition by another node (a "
                    "takeover, or a new holder after a release) must raise it by exactly 1, a "
                    "renewal must keep it (422 Invalid otherwise). One PoolLease uid at one "
                    "leaseTransitions value is one leader term.")},
         {"leaseDurationSeconds"},
         "",
         "granular"});
    d.push_back({Ours("DelegationChallenge"),
                 "DelegationChallenge is a random value the server issued to a pool, which its "
                 "members sign into their heartbeats so that a delegation proof shows the "
                 "heartbeat is recent.",
                 "object",
                 "",
                 {StringProp("value", "Base64 of 32 random bytes."),
                  RefProp("issueTime", Meta("MicroTime"),
                          "When the server issued it, on the issuing server's wall clock "
                          "(MicroTime).")},
                 {},
                 ""});
    d.push_back({Ours("PoolLeaseStatus"),
                 "PoolLeaseStatus is written by the server only; clients cannot set it through "
                 "the main resource.",
                 "object",
                 "",
                 {RefProp("observedTime", Meta("MicroTime"),
                          "The server's wall-clock time of the last renewal or acquisition: the "
                          "create, or the last write that changed spec.renewTime or "
                          "spec.holderIdentity (MicroTime). "
                          "Expiry is judged on the server's own clock from this renewal."),
                  openapi::WithListType(ArrayRefProp(
                      "challenges", Ours("DelegationChallenge"),
                      "The delegation challenges the server issued to the pool, newest first: "
                      "the first is current. The server issues a new one with a write that "
                      "keeps the lease held (the holder's renewal) once the current one is "
                      "--delegation-challenge-period (default 5s) old, and keeps those a proof "
                      "may still carry (--delegation-proof-max-age). The leader relays the "
                      "current one to the pool's members, which sign it into their heartbeats "
                      "(DelegatedLease spec.proof)."), "atomic")},
                 {},
                 ""});
    d.push_back(KindDefinition(
        "PoolLease",
        "PoolLease elects the leader of one node pool. It is named after the pool; the pool's "
        "nodes that still reach the cloud compete for it (GET, then UPDATE with the "
        "resourceVersion they read; a stale resourceVersion gets 409 Conflict). The holder is "
        "the pool leader, which renews DelegatedLeases for members that lost the cloud.",
        "Standard object metadata; metadata.name is the pool.",
        "The lease itself: holder, duration, acquire and renew times, transitions.",
        "Written by the server."));
    return d;
  }
};

}  // namespace

const Strategy& PoolLeases() { return Singleton<PoolLeaseStrategy>(); }

}  // namespace poolcoord::handlers::registry
