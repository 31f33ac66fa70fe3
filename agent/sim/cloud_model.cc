#include "agent/sim/cloud_model.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/microtime.h"
#include "cloud/codec.h"
#include "cloud/errors.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace poolcoord::sim {
namespace {

constexpr char kLeases[] = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
constexpr char kNodes[] = "/api/v1/nodes";
constexpr int kWatchHoldSeconds = 10;

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("Status");
  w.Key("apiVersion");
  w.String("v1");
  w.Key("metadata");
  w.StartObject();
  w.EndObject();
  w.Key("status");
  w.String("Failure");
  w.Key("message");
  w.String(message.c_str());
  w.Key("reason");
  w.String(reason.c_str());
  w.Key("code");
  w.Int(code);
  w.EndObject();
  return buf.GetString();
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int v = 0;
      if (absl::SimpleHexAtoi(std::string(s.substr(i + 1, 2)), &v)) {
        out.push_back(static_cast<char>(v));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i] == '+' ? ' ' : s[i]);
  }
  return out;
}

std::string QueryParam(const std::string& query, const std::string& name) {
  for (absl::string_view part : absl::StrSplit(query, '&')) {
    auto eq = part.find('=');
    if (eq != absl::string_view::npos && part.substr(0, eq) == name) {
      return PercentDecode(std::string_view(part.data() + eq + 1, part.size() - eq - 1));
    }
  }
  return "";
}

// "key" or "key=value" against labels.
bool Selects(const std::string& selector, const std::map<std::string, std::string>& labels) {
  if (selector.empty()) return true;
  const size_t eq = selector.find('=');
  auto it = labels.find(selector.substr(0, eq));
  if (it == labels.end()) return false;
  return eq == std::string::npos || it->second == selector.substr(eq + 1);
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

// An HTTP answer for a typed call's outcome: the object's JSON, or the
// error's metav1.Status.
template <typename T, typename Encode>
std::pair<int, std::string> Answer(const absl::StatusOr<T>& r, int ok_status, Encode encode) {
  if (r.ok()) return {ok_status, encode(*r)};
  const int code = cloud::CodeOf(r.status());
  return {code != 0 ? code : 500,
          StatusBody(code != 0 ? code : 500, cloud::ReasonOf(r.status()), cloud::MessageOf(r.status()))};
}

std::string EncodeNodeJson(const cloud::Node& n) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("apiVersion");
  w.String("v1");
  w.Key("kind");
  w.String("Node");
  w.Key("metadata");
  w.StartObject();
  w.Key("name");
  w.String(n.metadata.name.c_str());
  w.Key("uid");
  w.String(n.metadata.uid.c_str());
  w.Key("resourceVersion");
  w.String(n.metadata.resource_version.c_str());
  w.Key("labels");
  w.StartObject();
  for (const auto& [k, v] : n.metadata.labels) {
    w.Key(k.c_str());
    w.String(v.c_str());
  }
  w.EndObject();
  w.EndObject();
  w.Key("spec");
  w.StartObject();
  w.Key("taints");
  w.StartArray();
  for (const cloud::Taint& t : n.taints) {
    w.StartObject();
    w.Key("key");
    w.String(t.key.c_str());
    if (!t.value.empty()) {
      w.Key("value");
      w.String(t.value.c_str());
    }
    w.Key("effect");
    w.String(t.effect.c_str());
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Key("status");
  w.StartObject();
  w.Key("addresses");
  w.StartArray();
  for (const cloud::NodeAddress& a : n.addresses) {
    w.StartObject();
    w.Key("type");
    w.String(a.type.c_str());
    w.Key("address");
    w.String(a.address.c_str());
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return buf.GetString();
}

absl::Status LeaseNotFound(const std::string& name) {
  return cloud::ApiError(404, "NotFound",
                         absl::StrCat("leases.coordination.k8s.io \"", name, "\" not found"));
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    default: return "Internal Server Error";
  }
}

}  // namespace

// The typed clients: the same answers as over HTTP, without the wire.
class CloudModel::LeaseClient final : public cloud::LeaseInterface {
 public:
  explicit LeaseClient(CloudModel* m) : m_(m) {}
  absl::StatusOr<cloud::Lease> Get(const std::string& name) override {
    m_->server_requests_++;
    return m_->LeaseGet(name);
  }
  absl::StatusOr<cloud::LeaseList> List(const cloud::ListOptions& options) override {
    m_->server_requests_++;
    return m_->LeaseList(options.label_selector);
  }
  absl::StatusOr<cloud::Lease> Create(const cloud::Lease& lease) override {
    m_->server_requests_++;
    return m_->LeaseCreate(lease);
  }
  absl::StatusOr<cloud::Lease> Update(const cloud::Lease& lease) override {
    m_->server_requests_++;
    return m_->LeaseUpdate(lease);
  }
  absl::Status Delete(const std::string& name) override {
    return cloud::ApiError(405, "MethodNotAllowed", "the modelled cloud deletes no Lease");
  }
  absl::Status Watch(const cloud::ListOptions&, const cloud::WatchHandler<cloud::Lease>&,
                     base::StreamControl*) override {
    return absl::UnimplementedError("the modelled cloud's Lease watch is its lease observer");
  }

 private:
  CloudModel* const m_;
};

class CloudModel::NodeClient final : public cloud::NodeInterface {
 public:
  explicit NodeClient(CloudModel* m) : m_(m) {}
  absl::StatusOr<cloud::Node> Get(const std::string& name) override {
    m_->server_requests_++;
    return m_->NodeGet(name);
  }
  absl::StatusOr<cloud::NodeList> List(const cloud::ListOptions& options) override {
    m_->server_requests_++;
    return m_->NodeList(options.label_selector);
  }
  // The Nodes do not change during a run: a watch has nothing to say.
  absl::Status Watch(const cloud::ListOptions&, const cloud::WatchHandler<cloud::Node>&,
                     base::StreamControl*) override {
    return absl::OkStatus();
  }
  absl::StatusOr<cloud::Node> Patch(const std::string& name, std::string_view patch_type,
                                    const std::string& patch) override {
    m_->server_requests_++;
    if (patch_type != cloud::kMergePatch) {
      return cloud::ApiError(415, "UnsupportedMediaType", "the modelled cloud takes merge patches");
    }
    return m_->NodePatch(name, patch);
  }

 private:
  CloudModel* const m_;
};

class CloudModel::EventClient final : public cloud::EventInterface {
 public:
  explicit EventClient(CloudModel* m) : m_(m) {}
  absl::StatusOr<cloud::Event> Create(const cloud::Event& event) override {
    m_->server_requests_++;
    m_->events_created_++;
    return event;
  }

 private:
  CloudModel* const m_;
};

CloudModel::CloudModel(std::vector<NodeSpec> nodes, const base::Clock* clock)
    : clock_(clock != nullptr ? clock : base::RealClock::Get()),
      leases_client_(std::make_unique<LeaseClient>(this)),
      nodes_client_(std::make_unique<NodeClient>(this)),
      events_client_(std::make_unique<EventClient>(this)) {
  absl::MutexLock l(&mu_);
  for (NodeSpec& n : nodes) {
    NodeState s;
    s.resource_version = std::to_string(++rv_);
    s.spec = std::move(n);
    nodes_[s.spec.name] = std::move(s);
  }
}
CloudModel::~CloudModel() { Stop(); }

absl::Status CloudModel::Serve(int port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::UnavailableError(std::strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    return absl::UnavailableError(absl::StrCat("the modelled cloud on port ", port, ": ",
                                               std::strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void CloudModel::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> conns;
  {
    absl::MutexLock l(&conn_mu_);
    conns.swap(connections_);
  }
  for (auto& t : conns) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void CloudModel::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    absl::MutexLock l(&conn_mu_);
    connections_.emplace_back([this, fd] { Connection(fd); });
  }
}

// One keep-alive connection: requests in order until the client closes it.
void CloudModel::Connection(int fd) {
  std::string buf;
  char chunk[8192];
  while (!stopping_) {
    size_t head_end;
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, 200);
      if (stopping_) break;
      if (r <= 0) continue;
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) {
        ::close(fd);
        return;
      }
      buf.append(chunk, static_cast<size_t>(n));
    }
    if (stopping_) break;
    const std::string head = buf.substr(0, head_end);
    buf.erase(0, head_end + 4);
    std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
    std::vector<std::string> request = absl::StrSplit(lines[0], ' ');
    if (request.size() < 2) break;
    size_t length = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      const std::string lower = absl::AsciiStrToLower(lines[i]);
      if (lower.rfind("content-length:", 0) == 0) {
        absl::SimpleAtoi(absl::StripAsciiWhitespace(lines[i].substr(15)), &length);
      }
    }
    while (buf.size() < length) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) {
        ::close(fd);
        return;
      }
      buf.append(chunk, static_cast<size_t>(n));
    }
    const std::string body = buf.substr(0, length);
    buf.erase(0, length);
    server_requests_++;
    const std::string& target = request[1];
    const bool watch = target.find("watch=true") != std::string::npos ||
                       target.find("watch=1") != std::string::npos;
    if (watch) {
      // A quiet stream that ends after a while, as a watch timeout does.
      WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n");
      for (int i = 0; i < kWatchHoldSeconds * 5 && !stopping_; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      break;
    }
    Response r = Handle(request[0], target, body);
    if (!WriteAll(fd, absl::StrCat("HTTP/1.1 ", r.status, " ", Reason(r.status),
                                   "\r\nContent-Type: application/json\r\nContent-Length: ",
                                   r.body.size(), "\r\n\r\n", r.body))) {
      break;
    }
  }
  ::close(fd);
}

CloudModel::Response CloudModel::Handle(const std::string& method, const std::string& target,
                                        const std::string& body) {
  const size_t q = target.find('?');
  const std::string path = target.substr(0, q);
  const std::string query = q == std::string::npos ? "" : target.substr(q + 1);
  if (path == "/readyz" || path == "/healthz" || path == "/livez") return {200, "ok"};
  if (path.rfind(kLeases, 0) == 0) {
    std::string name = path.size() > sizeof(kLeases) ? path.substr(sizeof(kLeases)) : "";
    return HandleLeases(method, name, query, body);
  }
  if (path.rfind(kNodes, 0) == 0) {
    std::string name = path.size() > sizeof(kNodes) ? path.substr(sizeof(kNodes)) : "";
    return HandleNodes(method, name, query, body);
  }
  if (path.rfind("/api/v1/namespaces/", 0) == 0 && path.size() > 7 &&
      path.substr(path.size() - 7) == "/events") {
    if (method != "POST") return {405, StatusBody(405, "MethodNotAllowed", "events: POST only")};
    events_created_++;
    return {201, body};
  }
  return {404, StatusBody(404, "NotFound", absl::StrCat("the modelled cloud serves no ", path))};
}

void CloudModel::DateRenewTimeLocked(const cloud::Lease* stored, cloud::Lease* written) {
  if (stored && stored->spec.renew_time_us == written->spec.renew_time_us) return;
  constexpr int64_t kSecond = 1'000'000;
  written->renew_time_written_us = clock_->NowMicros() / kSecond * kSecond;
}

void CloudModel::RecordRenewLocked(const std::string& node, const std::optional<int64_t>& renew_time) {
  if (!renew_time.has_value()) return;
  auto [it, first] = counted_renew_time_.try_emplace(node, *renew_time);
  if (!first) {
    if (*renew_time <= it->second) {
      ++renewals_not_counted_;
      return;
    }
    it->second = *renew_time;
  }
  changes_[node].push_back(clock_->MonotonicMicros());
}

int64_t CloudModel::renewals_not_counted() {
  absl::MutexLock l(&mu_);
  return renewals_not_counted_;
}

void CloudModel::Observe(const cloud::Lease& lease) {
  if (lease_observer_) lease_observer_(lease);
}

absl::StatusOr<cloud::Lease> CloudModel::LeaseGet(const std::string& name) {
  absl::MutexLock l(&mu_);
  auto it = leases_.find(name);
  if (it == leases_.end()) return LeaseNotFound(name);
  return it->second;
}

absl::StatusOr<cloud::LeaseList> CloudModel::LeaseList(const std::string& label_selector) {
  absl::MutexLock l(&mu_);
  cloud::LeaseList out;
  out.resource_version = std::to_string(rv_);
  for (const auto& [n, lease] : leases_) {
    if (Selects(label_selector, lease.metadata.labels)) out.items.push_back(lease);
  }
  return out;
}

absl::StatusOr<cloud::Lease> CloudModel::LeaseCreate(cloud::Lease lease) {
  {
    absl::MutexLock l(&mu_);
    const std::string n = lease.metadata.name;
    if (leases_.count(n)) {
      return cloud::ApiError(409, "AlreadyExists", absl::StrCat("leases \"", n, "\" already exists"));
    }
    lease.metadata.namespace_ = "kube-node-lease";
    lease.metadata.resource_version = std::to_string(++rv_);
    lease.metadata.uid = absl::StrCat("uid-lease-", n);
    lease.renew_time_written_us = std::nullopt;
    DateRenewTimeLocked(nullptr, &lease);
    RecordRenewLocked(n, lease.spec.renew_time_us);
    leases_[n] = lease;
    server_lease_writes_++;
  }
  Observe(lease);
  return lease;
}

absl::StatusOr<cloud::Lease> CloudModel::LeaseUpdate(cloud::Lease lease) {
  {
    absl::MutexLock l(&mu_);
    const std::string& name = lease.metadata.name;
    auto it = leases_.find(name);
    if (it == leases_.end()) return LeaseNotFound(name);
    if (lease.metadata.resource_version != it->second.metadata.resource_version) {
      return cloud::ApiError(
          409, "Conflict",
          absl::StrCat("Operation cannot be fulfilled on leases.coordination.k8s.io \"", name,
                       "\": the object has been modified; please apply your changes to the latest "
                       "version and try again"));
    }
    lease.metadata.namespace_ = "kube-node-lease";
    lease.metadata.uid = it->second.metadata.uid;
    lease.metadata.resource_version = std::to_string(++rv_);
    lease.renew_time_written_us = it->second.renew_time_written_us;
    DateRenewTimeLocked(&it->second, &lease);
    RecordRenewLocked(name, lease.spec.renew_time_us);
    it->second = lease;
    server_lease_writes_++;
  }
  Observe(lease);
  return lease;
}

CloudModel::Response CloudModel::HandleLeases(const std::string& method, const std::string& name,
                                              const std::string& query, const std::string& body) {
  auto encode = [](const cloud::Lease& lease) {
    return cloud::EncodeLease(lease, "coordination.k8s.io/v1", "Lease");
  };
  std::pair<int, std::string> answer;
  if (name.empty() && method == "GET") {
    auto list = LeaseList(QueryParam(query, "labelSelector"));
    std::string items;
    for (const auto& lease : list->items) absl::StrAppend(&items, items.empty() ? "" : ",", encode(lease));
    return {200, absl::StrCat(R"({"apiVersion":"coordination.k8s.io/v1","kind":"LeaseList",)",
                              R"("metadata":{"resourceVersion":")", list->resource_version,
                              R"("},"items":[)", items, "]}")};
  }
  if (method == "GET") {
    answer = Answer(LeaseGet(name), 200, encode);
  } else if (method == "POST" || method == "PUT") {
    auto lease = cloud::DecodeLease(body);
    if (!lease.ok()) return {400, StatusBody(400, "BadRequest", "not a Lease")};
    if (method == "PUT") lease->metadata.name = name;
    answer = method == "POST" ? Answer(LeaseCreate(*lease), 201, encode)
                              : Answer(LeaseUpdate(*lease), 200, encode);
  } else {
    return {405, StatusBody(405, "MethodNotAllowed", method)};
  }
  return {answer.first, std::move(answer.second)};
}

cloud::Node CloudModel::NodeLocked(const NodeState& n) const {
  cloud::Node node;
  node.metadata.name = n.spec.name;
  node.metadata.uid = "uid-node-" + n.spec.name;
  node.metadata.resource_version = n.resource_version;
  node.metadata.labels = n.spec.labels;
  node.taints = n.taints;
  node.addresses.push_back({"InternalIP", n.spec.internal_ip});
  return node;
}

absl::StatusOr<cloud::Node> CloudModel::NodeGet(const std::string& name) {
  absl::MutexLock l(&mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return cloud::ApiError(404, "NotFound", absl::StrCat("nodes \"", name, "\" not found"));
  }
  return NodeLocked(it->second);
}

absl::StatusOr<cloud::NodeList> CloudModel::NodeList(const std::string& label_selector) {
  absl::MutexLock l(&mu_);
  cloud::NodeList out;
  out.resource_version = std::to_string(rv_);
  for (const auto& [n, state] : nodes_) {
    if (Selects(label_selector, state.spec.labels)) out.items.push_back(NodeLocked(state));
  }
  return out;
}

absl::StatusOr<cloud::Node> CloudModel::NodePatch(const std::string& name, const std::string& patch) {
  absl::MutexLock l(&mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return cloud::ApiError(404, "NotFound", absl::StrCat("nodes \"", name, "\" not found"));
  }
  rapidjson::Document d;
  d.Parse(patch.data(), patch.size());
  if (d.HasParseError() || !d.IsObject()) return cloud::ApiError(400, "BadRequest", "bad patch");
  if (auto md = d.FindMember("metadata"); md != d.MemberEnd() && md->value.IsObject()) {
    auto rv = md->value.FindMember("resourceVersion");
    if (rv != md->value.MemberEnd() && rv->value.IsString() &&
        it->second.resource_version != rv->value.GetString()) {
      return cloud::ApiError(409, "Conflict", "the object has been modified");
    }
  }
  if (auto spec = d.FindMember("spec"); spec != d.MemberEnd() && spec->value.IsObject()) {
    if (auto t = spec->value.FindMember("taints"); t != spec->value.MemberEnd() && t->value.IsArray()) {
      it->second.taints.clear();
      for (const auto& v : t->value.GetArray()) {
        if (!v.IsObject() || !v.HasMember("key") || !v["key"].IsString()) continue;
        cloud::Taint taint;
        taint.key = v["key"].GetString();
        if (v.HasMember("value") && v["value"].IsString()) taint.value = v["value"].GetString();
        if (v.HasMember("effect") && v["effect"].IsString()) taint.effect = v["effect"].GetString();
        it->second.taints.push_back(taint);
      }
      taint_patches_++;
    }
  }
  it->second.resource_version = std::to_string(++rv_);
  return NodeLocked(it->second);
}

CloudModel::Response CloudModel::HandleNodes(const std::string& method, const std::string& name,
                                             const std::string& query, const std::string& body) {
  if (name.empty() && method == "GET") {
    auto list = NodeList(QueryParam(query, "labelSelector"));
    std::string items;
    for (const auto& n : list->items) absl::StrAppend(&items, items.empty() ? "" : ",", EncodeNodeJson(n));
    return {200, absl::StrCat(R"({"apiVersion":"v1","kind":"NodeList","metadata":{"resourceVersion":")",
                              list->resource_version, R"("},"items":[)", items, "]}")};
  }
  std::pair<int, std::string> answer;
  if (method == "GET") {
    answer = Answer(NodeGet(name), 200, EncodeNodeJson);
  } else if (method == "PATCH") {
    answer = Answer(NodePatch(name, body), 200, EncodeNodeJson);
  } else {
    return {405, StatusBody(405, "MethodNotAllowed", method)};
  }
  return {answer.first, std::move(answer.second)};
}

void CloudModel::KubeletRenew(const std::string& node, int64_t renew_wall_us) {
  cloud::Lease stored;
  {
    absl::MutexLock l(&mu_);
    auto it = leases_.find(node);
    if (it == leases_.end()) {
      cloud::Lease lease;
      lease.metadata.name = node;
      lease.metadata.namespace_ = "kube-node-lease";
      lease.metadata.uid = absl::StrCat("uid-lease-", node);
      it = leases_.emplace(node, std::move(lease)).first;
    }
    cloud::Lease renewed = it->second;
    renewed.spec.holder_identity = node;
    renewed.spec.lease_duration_seconds = 40;
    renewed.spec.renew_time_us = renew_wall_us;
    DateRenewTimeLocked(&it->second, &renewed);
    it->second = std::move(renewed);
    it->second.metadata.resource_version = std::to_string(++rv_);
    RecordRenewLocked(node, it->second.spec.renew_time_us);
    stored = it->second;
  }
  Observe(stored);
}

absl::StatusOr<cloud::Lease> CloudModel::GetLease(const std::string& node) {
  absl::MutexLock l(&mu_);
  auto it = leases_.find(node);
  if (it == leases_.end()) return absl::NotFoundError(absl::StrCat("no Lease for ", node));
  return it->second;
}

int64_t CloudModel::LastChange(const std::string& node) {
  absl::MutexLock l(&mu_);
  auto it = changes_.find(node);
  return it == changes_.end() || it->second.empty() ? 0 : it->second.back();
}

std::vector<int64_t> CloudModel::Changes(const std::string& node) {
  absl::MutexLock l(&mu_);
  auto it = changes_.find(node);
  return it == changes_.end() ? std::vector<int64_t>{} : it->second;
}

}  // namespace poolcoord::sim
