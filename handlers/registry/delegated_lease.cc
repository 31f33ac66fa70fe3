// DelegatedLease (delegatedleases, dl), cluster-scoped, named after its node:
// the heartbeat of a node that lost the cloud, written for it by its pool's
// leader. Everything the API does with it is here (the map of a kind is in
// strategy.h):
//   fields     holderIdentity, leaseDurationSeconds, renewTime, poolName,
//              delegate (the row of store/object.cc), proof (write-only: the
//              member's signed heartbeat and certificate, checked by the rules
//              and never stored); status.observedTime,
//              expired, leaderTerm, proof (what the server
//              verified last), server-written.
//   defaults   none. Status is the server's: dropped on create, kept on update
//              (LeaseStrategy, lease_strategy.h, as for every lease-shaped kind).
//   validation (422, one cause per field, for every writer, system:masters
//              included except for delegate): the annotation
//              openyurt.io/delegate-heartbeat exactly "true"; holderIdentity =
//              the name; poolName = the node's pool; renewTime present;
//              leaseDurationSeconds 1..--max-lease-duration, present; delegate =
//              the writing node.
//   admission  before validation, a node identity (403) and a loaded membership
//              (503); after it, election/'s DelegatedLease rules: only the
//              current, unexpired leader of the node's pool; renewTime never
//              backwards within one leader term (403/409; counted up to the
//              server's time of the last renewal); the proof of life
//              (--delegation-proof: election/delegation_proof.h, 403/422). The
//              server stamps status.observedTime and leaderTerm on a renewal (a
//              new renewTime: election::RenewsLease), status.proof and the label
//              coordination.pool/pool=<pool>. /status: system:masters only
//              (LeaseStrategy). Delete: the node itself or its pool's leader.
//   columns    Pool, Delegate, Renewed, Expired (-o wide).
//   selectors  spec.poolName, besides metadata.name and metadata.namespace.
//   schema     DelegatedLeaseSpec, DelegationProof, LeaderTerm,
//              DelegationProofStatus, DelegatedLeaseStatus, DelegatedLease (below).
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/quote.h"
#include "election/delegation_proof.h"
#include "election/lease_rules.h"
#include "election/membership.h"
#include "handlers/openapi_schema.h"
#include "handlers/registry/lease_strategy.h"
#include "handlers/registry/strategy.h"
#include "handlers/table.h"

namespace poolcoord::handlers::registry {
namespace {

using election::kDelegateAnnotation;
using openapi::BoolProp;
using openapi::Definition;
using openapi::Int32Prop;
using openapi::Int64Prop;
using openapi::KindDefinition;
using openapi::Meta;
using openapi::Ours;
using openapi::RefProp;
using openapi::StringProp;
using store::FieldCause;
using store::Object;

constexpr TableColumn kColumns[] = {
    {"Pool", "string", "", "spec.poolName: the node pool the node belongs to.", 0},
    {"Delegate", "string", "", "spec.delegate: the pool leader that renewed this heartbeat.", 0},
    kRenewedColumn,
    {"Expired", "boolean", "", "status.expired: whether the server judged the delegated "
                               "heartbeat expired.", 1},
};

constexpr SelectableField kSelectableFields[] = {
    {"spec.poolName", [](const Object& o) { return o.spec.pool_name.value_or(""); }},
};

class DelegatedLeaseStrategy final : public LeaseStrategy {
 public:
  const store::ResourceInfo& Info() const override {
    return store::InfoFor(store::Kind::kDelegatedLease);
  }

  // Validation reads the membership (poolName) and the writer (delegate), so it
  // runs after CheckWriter has found both usable.
  std::vector<FieldCause> Validate(const WriteContext& ctx, const Object& object) const override {
    const std::string& name = object.metadata.name;
    const auto& spec = object.spec;
    std::vector<FieldCause> causes;
    ValidateLeaseDuration(spec, MaxLeaseDurationSeconds(ctx), /*required=*/true, causes);
    auto ann = object.metadata.annotations.find(kDelegateAnnotation);
    if (ann == object.metadata.annotations.end()) {
      causes.push_back(store::FieldRequired(
          "metadata.annotations",
          absl::StrCat("a DelegatedLease must carry the annotation ", kDelegateAnnotation,
                       ": \"true\"")));
    } else if (ann->second != "true") {
      causes.push_back(store::FieldInvalid(
          "metadata.annotations", absl::StrCat(kDelegateAnnotation, "=", base::GoQuote(ann->second)),
          absl::StrCat("the annotation ", kDelegateAnnotation, " must be exactly \"true\"")));
    }
    if (!spec.holder_identity) {
      causes.push_back(store::FieldRequired(
          "spec.holderIdentity", absl::StrCat("must be the node's name ", base::GoQuote(name))));
    } else if (*spec.holder_identity != name) {
      causes.push_back(store::FieldInvalid(
          "spec.holderIdentity", base::GoQuote(*spec.holder_identity),
          absl::StrCat("must equal the DelegatedLease's name (the node), ", base::GoQuote(name))));
    }
    ValidatePoolName(ctx, object, causes);
    if (!spec.renew_time_us) {
      causes.push_back(store::FieldRequired(
          "spec.renewTime", "the leader's last in-pool observation of the node (MicroTime)"));
    }
    if (!ctx.user.IsMaster()) {
      const std::string writer = ctx.user.NodeName();
      if (!spec.delegate || spec.delegate->empty()) {
        causes.push_back(store::FieldRequired(
            "spec.delegate", absl::StrCat("must name the node that writes it, ", base::GoQuote(writer))));
      } else if (*spec.delegate != writer) {
        causes.push_back(store::FieldInvalid(
            "spec.delegate", base::GoQuote(*spec.delegate),
            absl::StrCat("must name the node that writes it, ", base::GoQuote(writer))));
      }
    }
    return causes;
  }

  // The proof's signature, off the store's lock (DelegationProofs::Precheck):
  // Admit's Verify finds it checked.
  void Precheck(const WriteContext& ctx, const Object& proposed) const override {
    if (ctx.user.IsMaster()) return;  // the rules check no proof of system:masters
    election::DelegationProofs* proofs = ctx.rules->delegation_proofs();
    const auto& proof = store::DelegationOf(proposed).proof;
    if (proofs != nullptr && proof) proofs->Precheck(*proof, proposed.metadata.name);
  }
  // A renewal that carries its proof.
  bool MergePatchPrechecks(const rapidjson::Value& patch) const override {
    auto spec = patch.FindMember("spec");
    if (spec == patch.MemberEnd() || !spec->value.IsObject()) return false;
    auto proof = spec->value.FindMember("proof");
    return proof != spec->value.MemberEnd() && !proof->value.IsNull();
  }
  absl::Status CheckWriter(const WriteContext& ctx, const Object& object) const override {
    return ctx.rules->CheckDelegatedLeaseWriter(ctx.user, object.metadata.name);
  }
  absl::Status Admit(const WriteContext& ctx, const store::ObjectPtr& current, Object& proposed,
                     store::TxnReader& reader) const override {
    return ctx.rules->AdmitDelegatedLeaseWrite(ctx.user, current, proposed, reader);
  }
  absl::Status AdmitDelete(const WriteContext& ctx, const Object& current,
                           store::TxnReader& reader) const override {
    return ctx.rules->AdmitDelegatedLeaseDelete(ctx.user, current, reader);
  }

  std::span<const TableColumn> Columns() const override { return kColumns; }
  void WriteCells(store::JsonWriter& w, const Object& o, int64_t now_us) const override {
    WriteStringCell(w, o.spec.pool_name);
    WriteStringCell(w, o.spec.delegate);
    WriteAgeCell(w, o.spec.renew_time_us, now_us);
    w.Bool(o.status.expired);
  }
  std::span<const SelectableField> SelectableFields() const override { return kSelectableFields; }

  std::vector<Definition> Definitions() const override;

 private:
  // spec.poolName: required, and the node's pool in the membership. Without
  // lease rules (handler tests) there is no membership to compare with.
  static void ValidatePoolName(const WriteContext& ctx, const Object& object,
                               std::vector<FieldCause>& causes) {
    const std::string& name = object.metadata.name;
    const auto& pool_name = object.spec.pool_name;
    std::optional<std::string> pool;
    if (ctx.rules) pool = ctx.rules->membership()->PoolOf(name);
    if (!pool_name || pool_name->empty()) {
      causes.push_back(store::FieldRequired(
          "spec.poolName", !ctx.rules ? std::string("must be the node's pool")
                           : pool     ? absl::StrCat("must be the node's pool ", base::GoQuote(*pool))
                                      : absl::StrCat("node ", base::GoQuote(name), " belongs to no pool")));
    } else if (!ctx.rules) {
      return;
    } else if (!pool) {
      causes.push_back(store::FieldInvalid(
          "spec.poolName", base::GoQuote(*pool_name),
          absl::StrCat("node ", base::GoQuote(name),
                       " belongs to no pool in the membership, so it cannot be delegated")));
    } else if (*pool_name != *pool) {
      causes.push_back(store::FieldInvalid(
          "spec.poolName", base::GoQuote(*pool_name), absl::StrCat("must be the node's pool ", base::GoQuote(*pool))));
    }
  }
};

std::vector<Definition> DelegatedLeaseStrategy::Definitions() const {
  std::vector<Definition> d;
  d.push_back(
      {Ours("DelegatedLeaseSpec"),
       "DelegatedLeaseSpec is a node's heartbeat as its pool leader renews it on its behalf.",
       "object",
       "",
       {StringProp("holderIdentity",
                   "The node whose heartbeat this is; must equal metadata.name (422 Invalid "
                   "otherwise)."),
        Int32Prop("leaseDurationSeconds",
                  "How long, in seconds, the heartbeat stays live after the server accepted the "
                  "last renewal (status.observedTime). From 1 to the server's --max-lease-duration "
                  "(default 300)."),
        RefProp("renewTime", Meta("MicroTime"),
                "The pool leader's last in-pool observation of the node, on the leader's clock "
                "(MicroTime). Within one leader term it never goes backwards (409 Conflict) "
                "past the server's own time of the last renewal (status.observedTime), so a "
                "leader clock that runs ahead blocks nothing; a new leader term starts fresh."),
        StringProp("poolName",
                   "The node pool of the node; required, and must be the node's pool (422 "
                   "Invalid otherwise). Also usable as a field selector: spec.poolName=<pool>."),
        StringProp("delegate",
                   "The pool leader that wrote this heartbeat; must be the writer's node name "
                   "(422 Invalid otherwise). Only the current, unexpired holder of the pool's "
                   "PoolLease may write (403 Forbidden otherwise)."),
        RefProp("proof", Ours("DelegationProof"),
                "The node's own proof of life: its latest signed in-pool heartbeat, as the "
                "leader received it, and its certificate. Required of a pool leader's writes "
                "when the server runs with --delegation-proof=required (403 Forbidden without "
                "it), checked when given with =optional, ignored with =off. "
                "Write-only, as a Secret's stringData: the server checks it and records what "
                "it verified in status.proof, and never stores or returns it.")},
       {"holderIdentity", "leaseDurationSeconds", "poolName", "renewTime"},
       "",
       "granular"});
  d.push_back(
      {Ours("DelegationProof"),
       "DelegationProof is a member's signed heartbeat and certificate, forwarded by its pool "
       "leader. The server accepts it when: the certificate chains to the cluster's client CA "
       "and names system:node:<metadata.name> in group system:nodes; the heartbeat names that "
       "certificate (SHA-256), that node and its pool, says the node is cut off from the cloud, "
       "and its signature verifies; it carries a challenge the server issued to this pool "
       "(PoolLease status.challenges) no longer ago than --delegation-proof-max-age (default "
       "15s), judged on the server's clock; its sequence number is newer than status.proof's "
       "for the same boot ID. Otherwise 403 Forbidden naming the rule, or 422 Invalid for a "
       "proof that does not decode; nothing is written. With a proof, leaseDurationSeconds "
       "may not exceed --delegation-proof-max-age.",
       "object",
       "",
       {StringProp("heartbeat",
                   "The heartbeat datagram exactly as the member sent it on the pool LAN (signed "
                   "bytes, signature length and signature), base64 (RFC 4648, standard "
                   "alphabet). At most 1400 bytes."),
        StringProp("certificate",
                   "The member's kubelet client certificate that the heartbeat names: base64 of "
                   "its DER, or PEM.")},
       {"heartbeat", "certificate"},
       ""});
  d.push_back({Ours("LeaderTerm"),
               "LeaderTerm identifies one leader term: one PoolLease object at one "
               "leaseTransitions value.",
               "object",
               "",
               {StringProp("poolLeaseUID",
                           "metadata.uid of the PoolLease whose holder wrote the heartbeat."),
                Int32Prop("leaseTransitions",
                          "spec.leaseTransitions of that PoolLease at the write.")},
               {},
               ""});
  d.push_back(
      {Ours("DelegatedLeaseStatus"),
       "DelegatedLeaseStatus is written by the server only.",
       "object",
       "",
       {RefProp("observedTime", Meta("MicroTime"),
                "The server's wall-clock time of the last renewal: the create, or the last "
                "write that changed spec.renewTime (MicroTime). The "
                "heartbeat is live while observedTime plus spec.leaseDurationSeconds lies ahead "
                "on the server's clock."),
        BoolProp("expired", "True once the server found the heartbeat expired."),
        RefProp("leaderTerm", Ours("LeaderTerm"),
                "The leader term the heartbeat was written in; it belongs to the current leader "
                "only while that term is the PoolLease's current, live term."),
        RefProp("proof", Ours("DelegationProofStatus"),
                "The last delegation proof the server accepted for the node (spec.proof). A new "
                "proof must carry a newer sequence number for the same boot ID.")},
       {},
       ""});
  d.push_back({Ours("DelegationProofStatus"),
               "DelegationProofStatus records the heartbeat of the last accepted delegation "
               "proof.",
               "object",
               "",
               {StringProp("bootID",
                           "The boot ID of the member's agent that signed it (32 hex digits; "
                           "new at each agent start)."),
                Int64Prop("sequence", "The heartbeat's sequence number within that boot."),
                StringProp("challenge",
                           "The challenge it carried, one the server issued to the pool.")},
               {},
               ""});
  d.push_back(KindDefinition(
      "DelegatedLease",
      "DelegatedLease is the heartbeat of a node that lost the cloud but still reaches its "
      "pool, written for it by the pool leader. It is named after the node and must carry the "
      "annotation openyurt.io/delegate-heartbeat: \"true\". While it is live and belongs to "
      "the current leader, poolcoord renews the node's Lease in the cloud, so the cloud sees "
      "a network partition rather than a node failure.",
      "Standard object metadata; metadata.name is the node. The server sets the label "
      "coordination.pool/pool=<pool>.",
      "The delegated heartbeat.",
      "Written by the server."));
  return d;
}

}  // namespace

const Strategy& DelegatedLeases() { return Singleton<DelegatedLeaseStrategy>(); }

}  // namespace poolcoord::handlers::registry
