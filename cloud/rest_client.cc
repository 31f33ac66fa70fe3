#include "cloud/rest_client.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_view.h"
#include "cloud/errors.h"

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
    : config_(std::move(config)),
      transport_(std::move(transport)),
      limiter_(config_.qps, config_.burst) {}

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
  limiter_.Wait();
  absl::StatusOr<base::HttpResponse> r = transport_->Do(MakeRequest(method, path, body, o));
  if (r.ok() && config_.response_observer) config_.response_observer(*r);
  return r;
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
  limiter_.Wait();
  absl::Status s = transport_->Stream(MakeRequest("GET", path, "", o), on_line, control, &response);
  if (!s.ok()) return s;
  if (response.status != 0 && response.status != 200) {
    return StatusFromResponse(response.status, response.body);
  }
  return absl::OkStatus();
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
