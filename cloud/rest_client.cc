#include "cloud/rest_client.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_view.h"
#include "cloud/errors.h"
#include "yaml-cpp/yaml.h"

namespace poolcoord::cloud {

absl::StatusOr<std::unique_ptr<RestClient>> RestClient::New(RestConfig config) {
  if (!absl::StartsWith(config.server, "https://") && !absl::StartsWith(config.server, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("server must be an http(s) URL, got \"", config.server, "\""));
  }
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  base::HttpTransportConfig t;
  t.tls = config.tls;
  t.bearer_token = config.bearer_token;
  t.timeout = config.timeout;
  t.connect_timeout =
      std::min(config.timeout.count() > 0 ? config.timeout : std::chrono::milliseconds(10'000),
               std::chrono::milliseconds(10'000));
  t.user_agent = config.user_agent;
  t.max_idle_connections = config.max_idle_connections;
  t.retry = config.retry;
  auto transport = base::HttpTransport::New(std::move(t));
  return std::unique_ptr<RestClient>(new RestClient(std::move(config), std::move(transport)));
}

RestClient::RestClient(RestConfig config, std::unique_ptr<base::HttpTransport> transport)
    : config_(std::move(config)), transport_(std::move(transport)) {}

base::HttpRequest RestClient::MakeRequest(std::string_view method, std::string_view path,
                                          std::string_view body, const RequestOptions& o) const {
  base::HttpRequest r;
  r.method = std::string(method);
  r.url = absl::StrCat(config_.server, base::Av(path));
  r.body = std::string(body);
  r.content_type = o.content_type;
  r.bearer_token = o.bearer_token;
  r.timeout = o.timeout;
  return r;
}

absl::StatusOr<base::HttpResponse> RestClient::Send(std::string_view method, std::string_view path,
                                                    std::string_view body,
                                                    const RequestOptions& o) {
  return transport_->Do(MakeRequest(method, path, body, o));
}

absl::StatusOr<std::string> RestClient::Do(std::string_view method, std::string_view path,
                                           std::string_view body, const RequestOptions& o) {
  absl::StatusOr<base::HttpResponse> r = Send(method, path, body, o);
  if (!r.ok()) return r.status();
  if (r->status < 200 || r->status > 299) return StatusFromResponse(r->status, r->body);
  return std::move(r->body);
}

absl::StatusOr<std::string> RestClient::Patch(std::string_view path, std::string_view patch_type,
                                              std::string_view body, RequestOptions o) {
  o.content_type = std::string(patch_type);
  return Do("PATCH", path, body, o);
}

absl::Status RestClient::Watch(std::string_view path,
                               const std::function<bool(std::string_view)>& on_line,
                               base::StreamControl* control, const RequestOptions& o) {
  base::HttpResponse response;
  absl::Status s = transport_->Stream(MakeRequest("GET", path, "", o), on_line, control, &response);
  if (!s.ok()) return s;
  if (response.status != 0 && response.status != 200) {
    return StatusFromResponse(response.status, response.body);
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// ---------------------------------------------------------------- kubeconfig --

namespace {

const YAML::Node* FindNamed(const YAML::Node& list, const std::string& name, YAML::Node* out) {
  if (!list || !list.IsSequence()) return nullptr;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    if (item["name"] && item["name"].as<std::string>() == name) {
      *out = item;
      return out;
    }
  }
  return nullptr;
}

std::string Str(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap() || !n[key] || n[key].IsNull()) return "";
  return n[key].as<std::string>();
}

absl::StatusOr<std::string> DecodeData(const std::string& b64, const char* field) {
  std::string out;
  if (!absl::Base64Unescape(b64, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is not valid base64"));
  }
  return out;
}

}  // namespace

absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto resolve = [&](const std::string& p) -> std::string {
    if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
    return (dir / p).string();
  };
  try {
    YAML::Node root = YAML::Load(*text);
    if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a kubeconfig"));
    std::string ctx_name = context.empty() ? Str(root, "current-context") : context;
    if (ctx_name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": no current-context"));
    }
    YAML::Node ctx_item, cluster_item, user_item;
    if (!FindNamed(root["contexts"], ctx_name, &ctx_item)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": context \"", ctx_name, "\" not found"));
    }
    const YAML::Node ctx = ctx_item["context"];
    const std::string cluster_name = Str(ctx, "cluster");
    const std::string user_name = Str(ctx, "user");
    if (!FindNamed(root["clusters"], cluster_name, &cluster_item)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cluster \"", cluster_name, "\" not found"));
    }
    RestConfig config;
    const YAML::Node cluster = cluster_item["cluster"];
    config.server = Str(cluster, "server");
    if (config.server.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cluster has no server"));
    }
    config.tls.ca_file = resolve(Str(cluster, "certificate-authority"));
    if (auto d = Str(cluster, "certificate-authority-data"); !d.empty()) {
      auto pem = DecodeData(d, "certificate-authority-data");
      if (!pem.ok()) return pem.status();
      config.tls.ca_data = *std::move(pem);
    }
    config.tls.insecure_skip_verify = Str(cluster, "insecure-skip-tls-verify") == "true";
    // A context without a user is legal (anonymous); a named but missing one is not.
    if (!user_name.empty()) {
      if (!FindNamed(root["users"], user_name, &user_item)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": user \"", user_name, "\" not found"));
      }
      const YAML::Node user = user_item["user"];
      config.tls.cert_file = resolve(Str(user, "client-certificate"));
      config.tls.key_file = resolve(Str(user, "client-key"));
      if (auto d = Str(user, "client-certificate-data"); !d.empty()) {
        auto pem = DecodeData(d, "client-certificate-data");
        if (!pem.ok()) return pem.status();
        config.tls.cert_data = *std::move(pem);
      }
      if (auto d = Str(user, "client-key-data"); !d.empty()) {
        auto pem = DecodeData(d, "client-key-data");
        if (!pem.ok()) return pem.status();
        config.tls.key_data = *std::move(pem);
      }
      config.bearer_token = Str(user, "token");
      if (auto f = Str(user, "tokenFile"); config.bearer_token.empty() && !f.empty()) {
        auto tok = ReadFile(resolve(f));
        if (!tok.ok()) return tok.status();
        config.bearer_token = std::string(absl::StripAsciiWhitespace(*tok));
      }
    }
    return config;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
}

absl::StatusOr<RestConfig> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == 0 || *port == 0) {
    return absl::NotFoundError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are unset");
  }
  std::ifstream token_file(sa_dir + "/token");
  if (!token_file) return absl::NotFoundError(absl::StrCat("no service account token in ", sa_dir));
  std::stringstream token;
  token << token_file.rdbuf();
  RestConfig c;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = absl::StrCat("[", h, "]");  // IPv6
  c.server = absl::StrCat("https://", h, ":", port);
  c.bearer_token = std::string(absl::StripAsciiWhitespace(token.str()));
  c.tls.ca_file = sa_dir + "/ca.crt";
  return c;
}

}  // namespace poolcoord::cloud
