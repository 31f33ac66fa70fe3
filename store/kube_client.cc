#include "store/kube_client.h"
#include <cstdlib>

#include <curl/curl.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "base/string_view.h"
#include "rapidjson/document.h"
#include "yaml-cpp/yaml.h"

namespace poolcoord::store {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  std::string* body = nullptr;
  // Streaming mode: complete lines go to on_line; the partial tail stays in buffer.
  const std::function<bool(std::string_view)>* on_line = nullptr;
  std::string buffer;
  bool stopped_by_callback = false;
  const std::atomic<bool>* cancel = nullptr;
};

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  const size_t n = size * nmemb;
  if (t->on_line == nullptr) {
    t->body->append(data, n);
    return n;
  }
  t->buffer.append(data, n);
  size_t start = 0;
  for (size_t nl; (nl = t->buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(t->buffer.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (!(*t->on_line)(line)) {
      t->stopped_by_callback = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
  }
  t->buffer.erase(0, start);
  return n;
}

int ProgressCallback(void* userp, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(userp);
  return (t->cancel != nullptr && t->cancel->load()) ? 1 : 0;
}


curl_blob Blob(const std::string& s) {
  return curl_blob{const_cast<char*>(s.data()), s.size(), CURL_BLOB_NOCOPY};
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<KubeClient>> KubeClient::New(KubeClientConfig config) {
  if (!absl::StartsWith(config.server, "https://") && !absl::StartsWith(config.server, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("server must be an http(s) URL, got \"", config.server, "\""));
  }
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  GlobalInit();
  return std::unique_ptr<KubeClient>(new KubeClient(std::move(config)));
}

KubeClient::KubeClient(KubeClientConfig config) : config_(std::move(config)) {}

KubeClient::~KubeClient() {
  absl::MutexLock lock(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
  idle_.clear();
}

void* KubeClient::AcquireHandle() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void KubeClient::ReleaseHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(idle_.size()) < config_.max_idle_connections) {
    idle_.push_back(handle);
    return;
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

absl::Status KubeClient::Perform(void* handle, std::string_view method, std::string_view path,
                                 std::string_view body, const KubeRequestOptions& options,
                                 const std::function<bool(std::string_view)>* on_line,
                                 std::string* body_out, long* status) {
  const bool streaming = on_line != nullptr;
  CURL* curl = static_cast<CURL*>(handle);
  // reset keeps the connection cache and TLS session of the handle: that is the
  // keep-alive reuse this pool exists for.
  curl_easy_reset(curl);
  const std::string url = absl::StrCat(config_.server, base::Av(path));
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, config_.user_agent.c_str());
  const std::string m(method);
  if (m == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, m.c_str());
  }
  if (!body.empty() || m == "POST" || m == "PUT" || m == "PATCH") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }

  // TLS.
  curl_blob ca_blob, cert_blob, key_blob;
  if (!config_.ca_data.empty()) {
    ca_blob = Blob(config_.ca_data);
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca_blob);
  } else if (!config_.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_file.c_str());
  }
  if (!config_.client_cert_data.empty()) {
    cert_blob = Blob(config_.client_cert_data);
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert_blob);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
  }
  if (!config_.client_key_data.empty()) {
    key_blob = Blob(config_.client_key_data);
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key_blob);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!config_.client_key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }

  struct curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  const std::string ctype = absl::StrCat("Content-Type: ", options.content_type);
  headers = curl_slist_append(headers, ctype.c_str());
  // libcurl would otherwise wait for "100 Continue" on larger bodies.
  headers = curl_slist_append(headers, "Expect:");
  const std::string& token =
      options.bearer_token.empty() ? config_.bearer_token : options.bearer_token;
  std::string auth;
  if (!token.empty()) {
    auth = absl::StrCat("Authorization: Bearer ", token);
    headers = curl_slist_append(headers, auth.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  std::chrono::milliseconds timeout =
      options.timeout.count() > 0 ? options.timeout
                                  : (streaming ? std::chrono::milliseconds(0) : config_.timeout);
  if (timeout.count() > 0) {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<int64_t>(timeout.count(), 10'000)));
  } else {
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
  }

  Transfer transfer;
  transfer.cancel = options.cancel;
  transfer.body = body_out;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  if (options.cancel != nullptr) {
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, ProgressCallback);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);

  // Streaming callers see lines only when the answer is 200; anything else is
  // collected as the body of the error.
  std::function<bool(std::string_view)> line_gate;
  if (on_line != nullptr) {
    line_gate = [&](std::string_view line) -> bool {
      long code = 0;
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
      if (code != 200) {
        body_out->append(line);
        body_out->push_back('\n');
        return true;
      }
      return (*on_line)(line);
    };
    transfer.on_line = &line_gate;
  }

  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
  if (on_line != nullptr && *status != 200) body_out->append(transfer.buffer);

  if (rc == CURLE_OK) return absl::OkStatus();
  if (transfer.stopped_by_callback) return absl::OkStatus();
  const std::string detail = absl::StrCat(base::Av(method), " ", url, ": ", curl_easy_strerror(rc),
                                          errbuf[0] ? absl::StrCat(" (", errbuf, ")") : "");
  if (rc == CURLE_ABORTED_BY_CALLBACK) return absl::CancelledError(detail);
  if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(detail);
  return absl::UnavailableError(detail);
}

absl::StatusOr<KubeResponse> KubeClient::Do(std::string_view method, std::string_view path,
                                            std::string_view body,
                                            const KubeRequestOptions& options) {
  void* h = AcquireHandle();
  if (h == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  long status = 0;
  KubeResponse response;
  absl::Status s = Perform(h, method, path, body, options, nullptr, &response.body, &status);
  if (!s.ok()) {
    // A failed transfer may leave a half-used connection: do not reuse it.
    curl_easy_cleanup(static_cast<CURL*>(h));
    return s;
  }
  ReleaseHandle(h);
  response.status = static_cast<int>(status);
  return response;
}

absl::StatusOr<KubeResponse> KubeClient::Patch(std::string_view path, std::string_view body,
                                               KubeRequestOptions o) {
  if (o.content_type == "application/json") o.content_type = "application/merge-patch+json";
  return Do("PATCH", path, body, o);
}

absl::Status KubeClient::Watch(std::string_view path,
                               const std::function<bool(std::string_view)>& on_line,
                               const KubeRequestOptions& options) {
  void* h = AcquireHandle();
  if (h == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  long status = 0;
  std::string error_body;
  absl::Status s = Perform(h, "GET", path, "", options, &on_line, &error_body, &status);
  // A watch connection ends mid-stream by design; never put it back.
  curl_easy_cleanup(static_cast<CURL*>(h));
  if (!s.ok()) return s;
  if (status != 200) {
    return absl::FailedPreconditionError(
        absl::StrCat("watch ", base::Av(path), ": HTTP ", status, ": ", error_body.substr(0, 500)));
  }
  return absl::OkStatus();
}

absl::Status StatusFromKubeResponse(const KubeResponse& response) {
  if (response.status >= 200 && response.status < 300) return absl::OkStatus();
  std::string message;
  std::string reason;
  rapidjson::Document doc;
  doc.Parse(response.body.data(), response.body.size());
  if (!doc.HasParseError() && doc.IsObject()) {
    if (auto it = doc.FindMember("message"); it != doc.MemberEnd() && it->value.IsString()) {
      message = it->value.GetString();
    }
    if (auto it = doc.FindMember("reason"); it != doc.MemberEnd() && it->value.IsString()) {
      reason = it->value.GetString();
    }
  }
  if (message.empty()) message = response.body.substr(0, 300);
  message = absl::StrCat("HTTP ", response.status, reason.empty() ? "" : " ", reason, ": ",
                         message);
  switch (response.status) {
    case 400:
    case 422:
      return absl::InvalidArgumentError(message);
    case 401:
      return absl::UnauthenticatedError(message);
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 409:
      return reason == "AlreadyExists" ? absl::AlreadyExistsError(message)
                                       : absl::AbortedError(message);
    case 410:
      return absl::OutOfRangeError(message);
    case 429:
      return absl::ResourceExhaustedError(message);
    case 503:
      return absl::UnavailableError(message);
    case 504:
      return absl::DeadlineExceededError(message);
    default:
      return absl::UnknownError(message);
  }
}

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

absl::StatusOr<KubeClientConfig> LoadKubeconfig(const std::string& path,
                                                const std::string& context) {
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
      return absl::InvalidArgumentError(absl::StrCat(path, ": context \"", ctx_name, "\" not found"));
    }
    const YAML::Node ctx = ctx_item["context"];
    const std::string cluster_name = Str(ctx, "cluster");
    const std::string user_name = Str(ctx, "user");
    if (!FindNamed(root["clusters"], cluster_name, &cluster_item)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cluster \"", cluster_name, "\" not found"));
    }
    KubeClientConfig config;
    const YAML::Node cluster = cluster_item["cluster"];
    config.server = Str(cluster, "server");
    if (config.server.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cluster has no server"));
    }
    config.ca_file = resolve(Str(cluster, "certificate-authority"));
    if (auto d = Str(cluster, "certificate-authority-data"); !d.empty()) {
      auto pem = DecodeData(d, "certificate-authority-data");
      if (!pem.ok()) return pem.status();
      config.ca_data = *std::move(pem);
    }
    config.insecure_skip_tls_verify = Str(cluster, "insecure-skip-tls-verify") == "true";
    // A context without a user is legal (anonymous); a named but missing one is not.
    if (!user_name.empty()) {
      if (!FindNamed(root["users"], user_name, &user_item)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": user \"", user_name, "\" not found"));
      }
      const YAML::Node user = user_item["user"];
      config.client_cert_file = resolve(Str(user, "client-certificate"));
      config.client_key_file = resolve(Str(user, "client-key"));
      if (auto d = Str(user, "client-certificate-data"); !d.empty()) {
        auto pem = DecodeData(d, "client-certificate-data");
        if (!pem.ok()) return pem.status();
        config.client_cert_data = *std::move(pem);
      }
      if (auto d = Str(user, "client-key-data"); !d.empty()) {
        auto pem = DecodeData(d, "client-key-data");
        if (!pem.ok()) return pem.status();
        config.client_key_data = *std::move(pem);
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

absl::StatusOr<KubeClientConfig> InClusterConfig(const std::string& sa_dir) {
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
  KubeClientConfig c;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = absl::StrCat("[", h, "]");  // IPv6
  c.server = absl::StrCat("https://", h, ":", port);
  c.bearer_token = std::string(absl::StripAsciiWhitespace(token.str()));
  c.ca_file = sa_dir + "/ca.crt";
  return c;
}

}  // namespace poolcoord::store
