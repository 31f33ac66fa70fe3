// The integration run's adapters from the agent core to the real server (over
// HTTPS with the node's token), the modelled cloud and the modelled LAN
// (fleet.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/kube_agent_cloud.h"
#include "agent/sim/fleet.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "election/pool_lease_lock.h"

namespace poolcoord::sim {

absl::StatusOr<base::HttpResponse> Fleet::Request(const Agent& a, const char* method,
                                                  const std::string& path, const std::string& body) {
  const int64_t t0 = MonoMicros();
  requests++;
  cloud::RequestOptions ro;
  ro.bearer_token = a.token;
  auto r = client->Send(method, path, body, ro);
  latency.Add(MonoMicros() - t0);
  if (!r.ok()) {
    request_errors++;
  } else if (r->status == 409) {
    conflicts++;
  } else if (r->status == 403) {
    forbidden++;
  } else if (r->status >= 500 || r->status == 429) {
    request_errors++;
  }
  return r;
}

std::vector<std::string> AgentLock::Challenges() const {
  std::vector<std::string> out;
  auto lease = cloud::DecodeLease(last_object_json_);
  if (lease.ok()) {
    for (const auto& c : lease->delegation.challenges) out.push_back(c.value);
  }
  return out;
}

absl::StatusOr<base::HttpResponse> AgentLock::Send(const char* method, const std::string& path,
                                                   const std::string& body) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive || a.killed || !fleet_->CloudOk(a, MonoMicros())) {
    a.cloud->Report(false);
    return absl::UnavailableError("cut off from the cloud");
  }
  auto r = fleet_->Request(a, method, path, body);
  a.cloud->Report(r.ok());
  return r;
}

absl::StatusOr<election::VersionedRecord> AgentLock::Get() {
  auto r = Send("GET", absl::StrCat(election::kPoolLeasesPath, "/", pool_), "");
  if (!r.ok()) return r.status();
  if (r->status != 200) return cloud::StatusFromResponse(r->status, r->body);
  auto rec = election::ParseLeaseRecord(r->body);
  if (!rec.ok()) return rec.status();
  last_object_json_ = std::move(r->body);
  return rec;
}

absl::StatusOr<std::string> AgentLock::Written(absl::StatusOr<base::HttpResponse> r) {
  if (!r.ok()) return r.status();
  if (r->status != 200 && r->status != 201) return cloud::StatusFromResponse(r->status, r->body);
  if (std::optional<Term> t = fleet_->ledger.RecordLeaseWrite(agent_, r->body, MonoMicros())) {
    fleet_->agents[agent_]->term = *t;
  }
  auto rec = election::ParseLeaseRecord(r->body);
  if (!rec.ok()) return rec.status();
  last_object_json_ = std::move(r->body);
  return rec->version;
}

absl::StatusOr<std::string> AgentLock::Create(const election::LeaderElectionRecord& r) {
  return Written(
      Send("POST", election::kPoolLeasesPath, election::EncodePoolLease("", pool_, r, "")));
}

absl::StatusOr<std::string> AgentLock::Update(const election::LeaderElectionRecord& r,
                                              const std::string& v) {
  return Written(Send("PUT", absl::StrCat(election::kPoolLeasesPath, "/", pool_),
                      election::EncodePoolLease(last_object_json_, pool_, r, v)));
}

absl::Status SimLan::Send(const std::string& address, absl::string_view datagram) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive) return absl::UnavailableError("dead");
  auto it = fleet_->agent_by_node.find(address);
  if (it == fleet_->agent_by_node.end()) return absl::InvalidArgumentError("no such member");
  fleet_->Deliver(it->second, datagram);
  return absl::OkStatus();
}

absl::StatusOr<base::HttpResponse> SimCloud::Send(const char* method, const std::string& path,
                                                  const std::string& body) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive || a.killed || !fleet_->CloudOk(a, MonoMicros())) {
    Report(false);
    return absl::UnavailableError("cut off from the cloud");
  }
  auto r = fleet_->Request(a, method, path, body);
  Report(r.ok());
  return r;
}

absl::StatusOr<agent::NodeLeaseObservation> SimCloud::ReadNodeLease(const std::string& node) {
  const Agent& a = *fleet_->agents[agent_];
  if (!a.alive || !fleet_->CloudOk(a, MonoMicros())) {
    Report(false);
    return absl::UnavailableError("cut off from the cloud");
  }
  Report(true);
  auto lease = fleet_->cloud_model->GetLease(node);
  if (!lease.ok()) return lease.status();
  return agent::ObserveNodeLease(*lease);
}

absl::StatusOr<std::string> SimCloud::ReadDelegatedLease(const std::string& node) {
  auto r = Send("GET", absl::StrCat(agent::kDelegatedLeasesPath, "/", node), "");
  if (!r.ok()) return r.status();
  if (r->status != 200) return cloud::StatusFromResponse(r->status, r->body);
  return agent::ResourceVersionOf(r->body);
}

absl::StatusOr<std::string> SimCloud::WriteDelegatedLease(const agent::DelegatedLeaseWrite& w) {
  const int64_t sent = MonoMicros();
  const std::string body = agent::EncodeDelegatedLease(w);
  auto r = w.resource_version.empty()
               ? Send("POST", agent::kDelegatedLeasesPath, body)
               : Send("PUT", absl::StrCat(agent::kDelegatedLeasesPath, "/", w.node), body);
  if (!r.ok()) return r.status();
  if (r->status != 200 && r->status != 201) {
    absl::Status refused = cloud::StatusFromResponse(r->status, r->body);
    if (r->status == 403) {
      (cloud::HasCauseField(refused, "spec.proof") ? fleet_->dl_proof_refused : fleet_->dl_refused)++;
    }
    return refused;
  }
  fleet_->dl_writes++;
  auto member = fleet_->agent_by_node.find(w.node);
  if (member != fleet_->agent_by_node.end()) {
    fleet_->ledger.RecordDelegatedWrite(agent_, member->second, sent, MonoMicros(),
                                        w.evidence ? w.evidence->arrival_mono_us : 0, r->body);
  }
  return agent::ResourceVersionOf(r->body);
}

absl::Status SimCloud::DeleteDelegatedLease(const std::string& node, const std::string& rv) {
  std::string options = R"({"apiVersion":"v1","kind":"DeleteOptions")";
  if (!rv.empty()) absl::StrAppend(&options, R"(,"preconditions":{"resourceVersion":")", rv, R"("})");
  options += "}";
  auto r = Send("DELETE", absl::StrCat(agent::kDelegatedLeasesPath, "/", node), options);
  if (!r.ok()) return r.status();
  return r->status == 200 ? absl::OkStatus() : cloud::StatusFromResponse(r->status, r->body);
}

}  // namespace poolcoord::sim
