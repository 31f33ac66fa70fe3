#include "election/node_membership_source.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "rapidjson/document.h"

namespace poolcoord::election {
namespace {

std::string PercentEscape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// name and pool label value of a Node object ("" when unlabelled).
std::pair<std::string, std::string> NodePool(const rapidjson::Value& node, const std::string& label) {
  std::string name, pool;
  auto md = node.FindMember("metadata");
  if (md == node.MemberEnd() || !md->value.IsObject()) return {name, pool};
  if (auto n = md->value.FindMember("name"); n != md->value.MemberEnd() && n->value.IsString()) {
    name = n->value.GetString();
  }
  if (auto l = md->value.FindMember("labels"); l != md->value.MemberEnd() && l->value.IsObject()) {
    if (auto p = l->value.FindMember(label.c_str()); p != l->value.MemberEnd() && p->value.IsString()) {
      pool = p->value.GetString();
    }
  }
  return {name, pool};
}

}  // namespace

NodeMembershipSource::NodeMembershipSource(store::KubeClient* cloud, MembershipIndex* index,
                                           std::string pool_label)
    : cloud_(cloud), index_(index), pool_label_(std::move(pool_label)) {}

NodeMembershipSource::~NodeMembershipSource() { Stop(); }

void NodeMembershipSource::Start() {
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void NodeMembershipSource::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void NodeMembershipSource::Publish() {
  MembershipIndex::PoolMap pools;
  for (const auto& [node, pool] : pool_of_) {
    if (!pool.empty()) pools[pool].push_back(node);
  }
  absl::Status s = index_->Replace("nodes", pools);
  if (!s.ok()) base::LogWarning("pool membership from Nodes: ", s.message());
}

absl::StatusOr<std::string> NodeMembershipSource::ListOnce() {
  // Only labelled Nodes matter: the label selector keeps the list small.
  auto r = cloud_->Get(absl::StrCat("/api/v1/nodes?labelSelector=", PercentEscape(pool_label_)));
  if (!r.ok()) return r.status();
  if (r->status != 200) return store::StatusFromKubeResponse(*r);
  rapidjson::Document d;
  d.Parse(r->body.c_str(), r->body.size());
  if (d.HasParseError() || !d.IsObject()) return absl::InternalError("node list is not JSON");
  pool_of_.clear();
  if (auto items = d.FindMember("items"); items != d.MemberEnd() && items->value.IsArray()) {
    for (const auto& item : items->value.GetArray()) {
      auto [name, pool] = NodePool(item, pool_label_);
      if (!name.empty()) pool_of_[name] = pool;
    }
  }
  Publish();
  std::string rv;
  if (auto md = d.FindMember("metadata"); md != d.MemberEnd() && md->value.IsObject()) {
    if (auto v = md->value.FindMember("resourceVersion");
        v != md->value.MemberEnd() && v->value.IsString()) {
      rv = v->value.GetString();
    }
  }
  return rv;
}

bool NodeMembershipSource::ApplyEvent(std::string_view line, std::string* resource_version) {
  rapidjson::Document d;
  d.Parse(line.data(), line.size());
  if (d.HasParseError() || !d.IsObject()) return true;
  auto type = d.FindMember("type");
  auto obj = d.FindMember("object");
  if (type == d.MemberEnd() || !type->value.IsString() || obj == d.MemberEnd()) return true;
  std::string_view t = type->value.GetString();
  if (t == "ERROR") return false;
  if (auto md = obj->value.FindMember("metadata"); md != obj->value.MemberEnd() && md->value.IsObject()) {
    if (auto v = md->value.FindMember("resourceVersion");
        v != md->value.MemberEnd() && v->value.IsString()) {
      *resource_version = v->value.GetString();
    }
  }
  if (t == "BOOKMARK") return true;
  auto [name, pool] = NodePool(obj->value, pool_label_);
  if (name.empty()) return true;
  if (t == "DELETED" || pool.empty()) {
    if (pool_of_.erase(name)) Publish();
  } else if (pool_of_[name] != pool) {
    pool_of_[name] = pool;
    Publish();
  }
  return true;
}

void NodeMembershipSource::Run() {
  auto backoff = std::chrono::milliseconds(500);
  std::string rv;
  std::atomic<bool>* stop = &stopping_;
  while (!stopping_) {
    if (rv.empty()) {
      auto listed = ListOnce();
      if (!listed.ok()) {
        base::LogWarning("pool membership from Nodes: list failed: ", listed.status().message(),
                         " (retry in ", backoff.count(), " ms)");
        for (auto waited = std::chrono::milliseconds(0); waited < backoff && !stopping_;
             waited += std::chrono::milliseconds(100)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        backoff = std::min(backoff * 2, std::chrono::milliseconds(30000));
        continue;
      }
      rv = *listed;
    }
    bool expired = false;
    store::KubeRequestOptions opts;
    opts.cancel = stop;
    absl::Status s = cloud_->Watch(
        absl::StrCat("/api/v1/nodes?watch=true&allowWatchBookmarks=true&timeoutSeconds=300"
                     "&labelSelector=",
                     PercentEscape(pool_label_), "&resourceVersion=", rv),
        [&](std::string_view line) {
          if (!ApplyEvent(line, &rv)) {
            expired = true;
            return false;
          }
          return true;
        },
        opts);
    if (expired || absl::IsOutOfRange(s) ||
        (absl::IsFailedPrecondition(s) && absl::StrContains(s.message(), "410"))) {
      rv.clear();  // relist, as the reflector does on 410 Expired
      continue;
    }
    if (!s.ok() && !stopping_) {
      for (auto waited = std::chrono::milliseconds(0); waited < backoff && !stopping_;
           waited += std::chrono::milliseconds(100)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      backoff = std::min(backoff * 2, std::chrono::milliseconds(30000));
    } else {
      backoff = std::chrono::milliseconds(500);
    }
  }
}

}  // namespace poolcoord::election
