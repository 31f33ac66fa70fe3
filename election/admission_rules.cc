#include "election/admission_rules.h"

#include <algorithm>
#include <span>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/microtime.h"
#include "base/quote.h"

namespace poolcoord::election {

namespace {


// "annotation openyurt.io/delegate-heartbeat", for messages (built only on denial).
std::string Ann() { return absl::StrCat("annotation ", kDelegateAnnotation); }

// username == "system:node:" + node, without building the string.
bool IsNodeUser(std::string_view username, std::string_view node) {
  constexpr std::string_view kPrefix = "system:node:";
  return username.size() == kPrefix.size() + node.size() && username.starts_with(kPrefix) &&
         username.substr(kPrefix.size()) == node;
}

AdmissionDecision Allow() { return AdmissionDecision{}; }

AdmissionDecision Deny(std::string message) {
  AdmissionDecision d;
  d.allowed = false;
  d.message = std::move(message);
  return d;
}

// A read the decision cannot do without failed (etcd unreachable, ...): the
// review is denied, never decided as if the objects were absent.
AdmissionDecision DenyUnreadable(std::string_view pool, const absl::Status& status) {
  return Deny(absl::StrCat("the state of pool ", base::GoQuote(pool),
                           " cannot be read now (", status.message(), "); retry"));
}

}  // namespace

AdmissionDecision DecideDelegatedHeartbeat(const AdmissionAttributes& attrs,
                                           const LeaseRules& rules, store::Store* store) {
  const AdmissionLease& obj = attrs.object;
  if (!obj.present || !obj.delegate_annotation) return Allow();

  const std::string& node = attrs.name;
  const bool node_itself = IsNodeUser(attrs.user.username, node);
  const AdmissionLease& previous = attrs.old_object;
  if (attrs.operation == "UPDATE" && node_itself &&
      previous.present && previous.delegate_annotation &&
      *previous.delegate_annotation == *obj.delegate_annotation) {
    // The kubelet writes back the Lease it read, annotation included. Checked
    // against the forwarder's renewTime (cloud time) or a membership change, a
    // kubelet whose clock runs behind, or whose node left its pool, would be
    // locked out of its own heartbeat for good: the forwarder removes the
    // annotation only after it sees the kubelet renew. Keeping the annotation
    // proves nothing new, so it passes before the validity checks.
    return Allow();
  }
  const MembershipIndex& membership = *rules.membership();
  if (!membership.Loaded()) {
    return Deny(absl::StrCat("pool membership is not loaded yet, so the ", Ann(),
                             " cannot be checked; retry in a few seconds"));
  }

  // Validity: applies to every requester, system:masters included.
  if (*obj.delegate_annotation != "true") {
    return Deny(absl::StrCat(Ann(), " has the value ", base::GoQuote(*obj.delegate_annotation),
                             "; it must be exactly \"true\" (or be removed)"));
  }
  if (obj.holder_identity.value_or("") != node) {
    return Deny(absl::StrCat("spec.holderIdentity ", base::GoQuote(obj.holder_identity.value_or("")),
                             " must equal the Lease's name ", base::GoQuote(node), " when the ", Ann(),
                             " is set"));
  }
  const std::optional<std::string> pool = membership.PoolOf(node);
  if (!pool) {
    return Deny(absl::StrCat("node ", base::GoQuote(node), " belongs to no pool, so its heartbeat "
                             "cannot be delegated; add it to a pool or remove the ", Ann()));
  }
  if (obj.renew_time_invalid) {
    return Deny("spec.renewTime is not a MicroTime (RFC 3339 with 6 fractional digits)");
  }
  const AdmissionLease& old = attrs.old_object;
  if (old.present && old.renew_time_us && obj.renew_time_us &&
      *obj.renew_time_us < *old.renew_time_us) {
    return Deny(absl::StrCat("spec.renewTime ", base::FormatMicroTime(*obj.renew_time_us),
                             " goes backwards from the stored ",
                             base::FormatMicroTime(*old.renew_time_us),
                             "; a delegated renewal must not be older than the current one"));
  }

  const base::UserInfo& user = attrs.user;
  if (user.IsMaster()) return Allow();

  if (node_itself) {
    const bool existed = attrs.operation == "UPDATE" && old.present && old.delegate_annotation;
    if (!existed) {
      return Deny(absl::StrCat("node ", base::GoQuote(node), " may not add the ", Ann(),
                               " to its own Lease: only poolcoord's forwarder marks a "
                               "delegated heartbeat; renew without the annotation"));
    }
    if (*old.delegate_annotation != *obj.delegate_annotation) {
      return Deny(absl::StrCat("node ", base::GoQuote(node), " may not change the ", Ann(),
                               " on its own Lease; keep it unchanged or remove it"));
    }
    return Allow();
  }

  const LeaseRulesOptions& opts = rules.options();
  const bool forwarder = !opts.forwarder_user.empty() && user.username == opts.forwarder_user;
  const auto& proxies = opts.lease_proxy_users;
  const bool proxy = std::find(proxies.begin(), proxies.end(), user.username) != proxies.end();
  if (!forwarder && !proxy) {
    return Deny(absl::StrCat(
        "user ", base::GoQuote(user.username), " may not set the ", Ann(),
        " on the Lease of node ", base::GoQuote(node),
        ": only poolcoord's forwarder (--forwarder-user), a lease-proxy user for "
        "pools poolcoord does not govern (--lease-proxy-users) or system:masters may"));
  }

  // The forwarder's verdict needs the PoolLease and the DelegatedLease as they
  // are now (a delegation gone before the review arrived must not pass): one
  // consistent read of both, one round trip on etcd.
  const store::ObjectKey keys[] = {{store::Kind::kPoolLease, *pool},
                                   {store::Kind::kDelegatedLease, node}};
  auto read = store->GetAll(std::span<const store::ObjectKey>(keys, forwarder ? 2 : 1));
  if (!read.ok()) return DenyUnreadable(*pool, read.status());
  const store::ObjectPtr& pool_lease = (*read)[0];
  const bool governed = pool_lease != nullptr;

  if (forwarder) {
    if (!governed) {
      return Deny(absl::StrCat("pool ", base::GoQuote(*pool), " of node ", base::GoQuote(node),
                               " is not governed by poolcoord (no poollease ", *pool,
                               "), so the forwarder has no delegation to forward"));
    }
    const store::ObjectPtr& delegated = (*read)[1];
    if (!delegated) {
      return Deny(absl::StrCat("node ", base::GoQuote(node), " has no DelegatedLease; the forwarder "
                               "may mark its heartbeat only while the leader of pool ",
                               base::GoQuote(*pool), " keeps a DelegatedLease for it"));
    }
    if (!rules.DelegationCurrent(*delegated, pool_lease.get())) {
      const bool leader_live = rules.PoolLeaseLive(*pool_lease);
      return Deny(absl::StrCat(
          "the DelegatedLease of node ", base::GoQuote(node), " is ",
          !leader_live ? absl::StrCat("from a pool whose lease has no live holder (pool ",
                                      base::GoQuote(*pool), ")")
          : rules.RemainingMicros(*delegated) <= 0
              ? std::string("expired")
              : absl::StrCat("from an earlier leader term of pool ", base::GoQuote(*pool)),
          "; the forwarder may mark the heartbeat only while a live DelegatedLease written "
          "by the current leader exists"));
    }
    return Allow();
  }

  if (governed) {
    return Deny(absl::StrCat(
        "pool ", base::GoQuote(*pool), " is governed by poolcoord (poollease ", *pool,
        " exists): the shared lease-proxy identity ", base::GoQuote(user.username),
        " proves nothing there; delegated heartbeats come from poolcoord's forwarder"));
  }
  return Allow();
}

}  // namespace poolcoord::election
