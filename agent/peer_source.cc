#include "agent/peer_source.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "rapidjson/document.h"
#include "rapidjson/prettywriter.h"
#include "rapidjson/stringbuffer.h"

namespace poolcoord::agent {
namespace {

constexpr char kCacheFile[] = "peers.json";

bool IsIpv4(const std::string& address) {
  in_addr a;
  return inet_pton(AF_INET, address.c_str(), &a) == 1;
}

}  // namespace

PeerSource::PeerSource(cloud::NodeInterface* nodes, PeerSourceOptions options, OnChange on_change)
    : nodes_(nodes), options_(std::move(options)), on_change_(std::move(on_change)) {}

PeerSource::~PeerSource() { Stop(); }

PoolView PeerSource::ViewOf(const std::string& pool, const std::string& self,
                            const std::vector<cloud::Node>& nodes) {
  PoolView view;
  view.pool = pool;
  view.self = self;
  for (const cloud::Node& n : nodes) {
    std::string chosen;
    for (const cloud::NodeAddress& a : n.addresses) {
      if (a.type != "InternalIP" || a.address.empty()) continue;
      if (chosen.empty() || (!IsIpv4(chosen) && IsIpv4(a.address))) chosen = a.address;
    }
    if (chosen.empty()) {
      base::LogWarning("pool ", pool, ": node ", n.metadata.name,
                       " has no InternalIP; it is left out of the pool's heartbeats");
      continue;
    }
    view.members[n.metadata.name] = chosen;
  }
  return view;
}

std::string PeerSource::EncodeCache(const PoolView& view) {
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> out(buf);
  out.StartObject();
  out.Key("pool");
  out.String(view.pool.c_str());
  out.Key("self");
  out.String(view.self.c_str());
  out.Key("members");
  out.StartObject();
  for (const auto& [node, address] : view.members) {
    out.Key(node.c_str());
    out.String(address.c_str());
  }
  out.EndObject();
  out.EndObject();
  return std::string(buf.GetString(), buf.GetSize()) + "\n";
}

absl::StatusOr<PoolView> PeerSource::DecodeCache(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  if (d.HasParseError() || !d.IsObject()) return absl::InvalidArgumentError("not a JSON object");
  PoolView view;
  auto str = [&](const char* key, std::string* out) {
    auto it = d.FindMember(key);
    if (it == d.MemberEnd() || !it->value.IsString()) return false;
    *out = it->value.GetString();
    return true;
  };
  auto members = d.FindMember("members");
  if (!str("pool", &view.pool) || !str("self", &view.self) || members == d.MemberEnd() ||
      !members->value.IsObject()) {
    return absl::InvalidArgumentError("pool, self and members are required");
  }
  for (const auto& m : members->value.GetObject()) {
    if (!m.value.IsString()) return absl::InvalidArgumentError("a member's address is not a string");
    view.members[m.name.GetString()] = m.value.GetString();
  }
  return view;
}

absl::StatusOr<std::shared_ptr<const PoolView>> PeerSource::LoadCache() const {
  if (options_.cache_dir.empty()) return absl::NotFoundError("no peer cache configured");
  const std::string path = absl::StrCat(options_.cache_dir, "/", kCacheFile);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no peer cache at ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<PoolView> view = DecodeCache(ss.str());
  if (!view.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", view.status().message()));
  }
  if (view->self != options_.node) {
    return absl::NotFoundError(absl::StrCat(path, " is the cache of node ", view->self));
  }
  auto shared = std::make_shared<const PoolView>(*std::move(view));
  on_change_(shared);
  return shared;
}

absl::StatusOr<std::string> PeerSource::DiscoverPool() {
  absl::StatusOr<cloud::Node> self = nodes_->Get(options_.node);
  if (!self.ok()) return self.status();
  auto it = self->metadata.labels.find(options_.pool_label);
  if (it == self->metadata.labels.end() || it->second.empty()) {
    return absl::NotFoundError(absl::StrCat("Node ", options_.node, " carries no ", options_.pool_label,
                                            " label: it belongs to no pool"));
  }
  return it->second;
}

void PeerSource::Publish(PoolView view) {
  if (view == last_published_) return;
  last_published_ = view;
  if (!options_.cache_dir.empty()) {
    const std::string path = absl::StrCat(options_.cache_dir, "/", kCacheFile);
    const std::string tmp = absl::StrCat(path, ".tmp");
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << EncodeCache(view);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      base::LogWarning("cannot write the peer cache ", path, ": ", std::strerror(errno));
    }
  }
  base::LogInfo("pool ", view.pool, ": ", view.members.size(), " members");
  on_change_(std::make_shared<const PoolView>(std::move(view)));
}

bool PeerSource::InPool(const cloud::Node& node) const {
  auto it = node.metadata.labels.find(options_.pool_label);
  return it != node.metadata.labels.end() && it->second == pool_;
}

void PeerSource::PublishCurrent() {
  std::vector<cloud::Node> all;
  all.reserve(current_.size());
  for (const auto& [name, n] : current_) all.push_back(n);
  Publish(ViewOf(pool_, options_.node, all));
}

void PeerSource::Start(const std::string& pool) {
  pool_ = pool;
  cloud::ReflectorOptions o;
  o.name = absl::StrCat("pool ", pool, " members from Nodes");
  o.list.label_selector = absl::StrCat(options_.pool_label, "=", pool);
  reflector_ = std::make_unique<NodeReflector>(
      nodes_, o,
      [this](const std::vector<cloud::Node>& all) {
        current_.clear();
        for (const cloud::Node& n : all) {
          if (InPool(n)) current_[n.metadata.name] = n;
        }
        PublishCurrent();
      },
      [this](const cloud::WatchEvent<cloud::Node>& ev) {
        // A Node that left the selector arrives as DELETED; one whose label no
        // longer names the pool is dropped too.
        if (ev.type == "DELETED" || !InPool(ev.object)) {
          current_.erase(ev.object.metadata.name);
        } else {
          current_[ev.object.metadata.name] = ev.object;
        }
        PublishCurrent();
      });
  reflector_->Start("");
}

void PeerSource::Stop() {
  if (reflector_ != nullptr) reflector_->Stop();
}

}  // namespace poolcoord::agent
