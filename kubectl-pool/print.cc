#include "kubectl-pool/print.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/microtime.h"
#include "base/yaml_quoting.h"
#include "rapidjson/document.h"
#include "rapidjson/prettywriter.h"
#include "rapidjson/stringbuffer.h"
#include "yaml-cpp/yaml.h"

namespace poolcoord::kubectl_pool {
namespace {

constexpr char kApiVersion[] = "kubectl-pool.coordination.pool/v1alpha1";
constexpr char kNone[] = "<none>";

// Whole seconds, rounded toward zero (Go's int(d.Seconds())).
int64_t Seconds(int64_t us) { return us / 1'000'000; }

// A cell's width as text/tabwriter measures it: in UTF-8 characters, not
// bytes (a holderIdentity "节点-1" is 4 wide, not 8).
size_t CellWidth(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// kubectl's table layout (text/tabwriter as kubectl configures it: minimum
// cell width 6, padding 3; the last column is not padded).
std::string Tabulate(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], CellWidth(r[i]));
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line = indent;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line.append(std::max<size_t>(width[i] + 3, 6) - CellWidth(r[i]), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string MembersHeader(const Snapshot& s) {
  return s.members_from == MembersFrom::kNodes ? "MEMBERS (NODES)" : "MEMBERS (DELEGATEDLEASES)";
}

std::string MembersSource(const Snapshot& s, const std::string& pool) {
  if (s.members_from == MembersFrom::kNodes) {
    return absl::StrCat("Nodes labelled ", s.pool_label, pool.empty() ? "" : "=", pool);
  }
  return "DelegatedLeases (spec.poolName); the server has no Nodes API";
}

std::string Expires(const PoolView& p, int64_t now) {
  if (!p.pool_lease) return kNone;
  if (p.leader.empty()) return "released";
  if (!p.expiry_us) return "<unknown>";
  return RelativeExpiry(*p.expiry_us, now);
}

std::string Time(const std::optional<int64_t>& us) {
  return us ? base::FormatMicroTime(*us) : kNone;
}

// ------------------------------------------------------------------ objects --

using rapidjson::Value;
using Alloc = rapidjson::Document::AllocatorType;

Value Str(const std::string& s, Alloc& a) { return Value(s.c_str(), s.size(), a); }
Value OptStr(const std::string& s, Alloc& a) { return s.empty() ? Value() : Str(s, a); }
Value OptTime(const std::optional<int64_t>& us, Alloc& a) {
  return us ? Str(base::FormatMicroTime(*us), a) : Value();
}

Value DelegationObject(const Delegation& d, Alloc& a) {
  Value o(rapidjson::kObjectType);
  o.AddMember("delegate", OptStr(d.delegate, a), a);
  o.AddMember("renewTime", OptTime(d.renew_time_us, a), a);
  o.AddMember("observedTime", OptTime(d.observed_time_us, a), a);
  o.AddMember("leaseDurationSeconds", d.lease_duration_seconds, a);
  o.AddMember("expiryTime", OptTime(d.expiry_us, a), a);
  o.AddMember("live", d.live, a);
  o.AddMember("currentTerm", d.current_term, a);
  o.AddMember("since", OptTime(d.since_us, a), a);
  o.AddMember("delegatedSeconds", Seconds(d.delegated_for_us), a);
  return o;
}

Value PoolObject(const PoolView& p, int64_t now, Alloc& a) {
  Value o(rapidjson::kObjectType);
  o.AddMember("apiVersion", Str(kApiVersion, a), a);
  o.AddMember("kind", "Pool", a);
  Value md(rapidjson::kObjectType);
  md.AddMember("name", Str(p.name, a), a);
  o.AddMember("metadata", md, a);
  o.AddMember("leader", OptStr(p.leader, a), a);
  o.AddMember("term", p.term ? Value(*p.term) : Value(), a);
  if (p.pool_lease) {
    const cloud::Lease& l = *p.pool_lease;
    Value pl(rapidjson::kObjectType);
    pl.AddMember("uid", Str(l.metadata.uid, a), a);
    pl.AddMember("resourceVersion", Str(l.metadata.resource_version, a), a);
    pl.AddMember("holderIdentity", OptStr(l.spec.holder_identity.value_or(""), a), a);
    pl.AddMember("leaseDurationSeconds",
                 l.spec.lease_duration_seconds ? Value(*l.spec.lease_duration_seconds) : Value(), a);
    pl.AddMember("acquireTime", OptTime(l.spec.acquire_time_us, a), a);
    pl.AddMember("renewTime", OptTime(l.spec.renew_time_us, a), a);
    pl.AddMember("leaseTransitions", l.spec.lease_transitions.value_or(0), a);
    pl.AddMember("observedTime", OptTime(l.status.observed_time_us, a), a);
    pl.AddMember("expiryTime", OptTime(p.expiry_us, a), a);
    pl.AddMember("expired", p.expired, a);
    pl.AddMember("expiresInSeconds",
                 p.expiry_us ? Value(static_cast<int64_t>(Seconds(*p.expiry_us - now))) : Value(),
                 a);
    o.AddMember("poolLease", pl, a);
  } else {
    o.AddMember("poolLease", Value(), a);
  }
  o.AddMember("memberCount", p.member_count, a);
  o.AddMember("delegated", p.delegated, a);
  if (p.longest) {
    Value l(rapidjson::kObjectType);
    l.AddMember("node", Str(p.longest->name, a), a);
    l.AddMember("since", OptTime(p.longest->delegation->since_us, a), a);
    l.AddMember("delegatedSeconds", Seconds(p.longest->delegation->delegated_for_us), a);
    o.AddMember("longestDelegation", l, a);
  } else {
    o.AddMember("longestDelegation", Value(), a);
  }
  Value members(rapidjson::kArrayType);
  for (const Member& m : p.members) {
    Value mo(rapidjson::kObjectType);
    mo.AddMember("name", Str(m.name, a), a);
    mo.AddMember("inPool", m.in_pool, a);
    mo.AddMember("delegation", m.delegation ? DelegationObject(*m.delegation, a) : Value(), a);
    members.PushBack(mo, a);
  }
  o.AddMember("members", members, a);
  return o;
}

void EmitYaml(const Value& v, YAML::Emitter& e) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      e << YAML::Null;
      break;
    case rapidjson::kFalseType:
      e << false;
      break;
    case rapidjson::kTrueType:
      e << true;
      break;
    case rapidjson::kNumberType:
      if (v.IsInt64()) {
        e << v.GetInt64();
      } else {
        e << v.GetDouble();
      }
      break;
    case rapidjson::kStringType: {
      const std::string s(v.GetString(), v.GetStringLength());
      // Whatever YAML would read as another type (a number, bool, null or
      // timestamp) is double-quoted, decided as the server's YAML answers do.
      if (base::YamlNeedsQuotes(s)) e << YAML::DoubleQuoted;
      e << s;
      break;
    }
    case rapidjson::kArrayType:
      if (v.Empty()) {
        e << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        break;
      }
      e << YAML::BeginSeq;
      for (const auto& item : v.GetArray()) EmitYaml(item, e);
      e << YAML::EndSeq;
      break;
    case rapidjson::kObjectType:
      if (v.ObjectEmpty()) {
        e << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      e << YAML::BeginMap;
      for (const auto& m : v.GetObject()) {
        e << YAML::Key << std::string(m.name.GetString(), m.name.GetStringLength()) << YAML::Value;
        EmitYaml(m.value, e);
      }
      e << YAML::EndMap;
      break;
  }
}

}  // namespace

std::string RelativeExpiry(int64_t at_us, int64_t now_us) {
  if (at_us > now_us) return absl::StrCat("in ", HumanDuration(at_us - now_us));
  return absl::StrCat("expired ", HumanDuration(now_us - at_us), " ago");
}

std::string FormatTable(const std::vector<PoolView>& pools, const Snapshot& snapshot) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NAME", "LEADER", "TERM", "EXPIRES", MembersHeader(snapshot), "DELEGATED",
                  "LONGEST DELEGATION"});
  for (const PoolView& p : pools) {
    std::string longest = kNone;
    if (p.longest) {
      longest = absl::StrCat(p.longest->name, " (",
                             p.longest->delegation->since_us
                                 ? HumanDuration(p.longest->delegation->delegated_for_us)
                                 : "since <unknown>",
                             ")");
    }
    rows.push_back({p.name, p.leader.empty() ? kNone : p.leader,
                    p.term ? absl::StrCat(*p.term) : kNone, Expires(p, snapshot.server_now_us),
                    absl::StrCat(p.member_count), absl::StrCat(p.delegated), longest});
  }
  return Tabulate(rows, "");
}

std::string FormatDescribe(const PoolView& p, const Snapshot& s) {
  const int64_t now = s.server_now_us;
  std::vector<std::vector<std::string>> head;
  head.push_back({"Name:", p.name});
  head.push_back({"Leader:", p.leader.empty() ? kNone : p.leader});
  if (p.pool_lease) {
    const cloud::Lease& l = *p.pool_lease;
    head.push_back({"Term:", absl::StrCat(*p.term, " (leaseTransitions of PoolLease uid ",
                                          l.metadata.uid.empty() ? kNone : l.metadata.uid, ")")});
    head.push_back({"Lease Duration:", l.spec.lease_duration_seconds
                                           ? absl::StrCat(*l.spec.lease_duration_seconds, "s")
                                           : kNone});
    head.push_back({"Acquire Time:", Time(l.spec.acquire_time_us)});
    head.push_back({"Renew Time:", absl::StrCat(Time(l.spec.renew_time_us),
                                                l.spec.renew_time_us ? " (the leader's clock)" : "")});
    head.push_back({"Observed Time:",
                    absl::StrCat(Time(l.status.observed_time_us),
                                 l.status.observed_time_us ? " (the server's clock)" : "")});
    std::string expires = Expires(p, now);
    if (p.expiry_us && !p.leader.empty()) {
      absl::StrAppend(&expires, " (", base::FormatMicroTime(*p.expiry_us), ")");
    }
    head.push_back({"Expires:", expires});
    head.push_back({"Resource Version:", l.metadata.resource_version});
  } else {
    head.push_back({"Term:", "<none> (no PoolLease: nobody has been elected)"});
  }
  head.push_back({"Server Time:", absl::StrCat(base::FormatMicroTime(now),
                                               s.server_time_from_date
                                                   ? " (the server's Date header)"
                                                   : " (this machine's clock: no Date header)")});
  head.push_back({"Members:", absl::StrCat(p.member_count, " from ", MembersSource(s, p.name))});
  std::string delegated = absl::StrCat(p.delegated, " live DelegatedLease", p.delegated == 1 ? "" : "s");
  if (p.longest) {
    absl::StrAppend(&delegated, "; longest: ", p.longest->name,
                    p.longest->delegation->since_us
                        ? absl::StrCat(" for ", HumanDuration(p.longest->delegation->delegated_for_us))
                        : "");
  }
  head.push_back({"Delegated:", delegated});
  // kubectl describe aligns values after the longest label.
  size_t label = 0;
  for (const auto& r : head) label = std::max(label, r[0].size());
  std::string out;
  for (const auto& r : head) {
    out += r[0] + std::string(label + 2 - r[0].size(), ' ') + r[1] + "\n";
  }
  if (p.members.empty()) {
    out += "Member Delegations:  <none>\n";
    return out;
  }
  out += "Member Delegations:\n";
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NODE", "DELEGATED", "DELEGATE", "RENEW TIME (LEADER'S CLOCK)",
                  "OBSERVED TIME (SERVER'S CLOCK)", "EXPIRES", "TERM", "SINCE"});
  for (const Member& m : p.members) {
    const std::string name = m.in_pool ? m.name : m.name + " (not labelled in this pool)";
    if (!m.delegation) {
      rows.push_back({name, "no", kNone, kNone, kNone, kNone, kNone, kNone});
      continue;
    }
    const Delegation& d = *m.delegation;
    std::string observed = Time(d.observed_time_us);
    if (d.observed_time_us) {
      absl::StrAppend(&observed, " (", HumanDuration(now - *d.observed_time_us), " ago)");
    }
    rows.push_back({name, d.live ? "yes" : "expired", d.delegate.empty() ? kNone : d.delegate,
                    Time(d.renew_time_us), observed,
                    d.expiry_us ? RelativeExpiry(*d.expiry_us, now) : kNone,
                    d.current_term ? "current" : "earlier",
                    d.since_us && d.live ? HumanDuration(d.delegated_for_us) : kNone});
  }
  out += Tabulate(rows, "  ");
  return out;
}

std::string FormatObjects(const std::vector<PoolView>& pools, const Snapshot& s, Format format,
                          bool single) {
  rapidjson::Document doc;
  Alloc& a = doc.GetAllocator();
  if (single && !pools.empty()) {
    doc.CopyFrom(PoolObject(pools[0], s.server_now_us, a), a);
  } else {
    doc.SetObject();
    doc.AddMember("apiVersion", Str(kApiVersion, a), a);
    doc.AddMember("kind", "PoolList", a);
    doc.AddMember("metadata", Value(rapidjson::kObjectType), a);
    doc.AddMember("serverTime", Str(base::FormatMicroTime(s.server_now_us), a), a);
    doc.AddMember("serverTimeSource", Str(s.server_time_from_date ? "Date" : "Local", a), a);
    doc.AddMember("membersFrom",
                  Str(s.members_from == MembersFrom::kNodes ? "Nodes" : "DelegatedLeases", a), a);
    doc.AddMember("poolLabel", Str(s.pool_label, a), a);
    Value items(rapidjson::kArrayType);
    for (const PoolView& p : pools) items.PushBack(PoolObject(p, s.server_now_us, a), a);
    doc.AddMember("items", items, a);
  }
  if (format == Format::kJson) {
    rapidjson::StringBuffer buf;
    rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
    w.SetIndent(' ', 4);
    doc.Accept(w);
    return std::string(buf.GetString(), buf.GetSize()) + "\n";
  }
  YAML::Emitter e;
  e.SetIndent(2);
  e.SetSeqFormat(YAML::Block);
  e.SetNullFormat(YAML::LowerNull);  // "null", as kubectl writes it, not "~"
  EmitYaml(doc, e);
  return std::string(e.c_str()) + "\n";
}

}  // namespace poolcoord::kubectl_pool
