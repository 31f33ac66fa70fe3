#include "store/etcd3_client.h"

#include <curl/curl.h>

#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_view.h"

namespace poolcoord::store {
namespace {


void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Sink {
  CURL* curl = nullptr;
  std::string body;  // unary answers, and the body of a non-200 stream answer
  const std::function<bool(std::string_view)>* on_line = nullptr;
  std::string partial;  // streaming: the unterminated tail
  bool stopped_by_callback = false;
};

size_t OnData(char* data, size_t size, size_t nmemb, void* userp) {
  auto* sink = static_cast<Sink*>(userp);
  const size_t n = size * nmemb;
  long code = 0;
  if (sink->on_line != nullptr) curl_easy_getinfo(sink->curl, CURLINFO_RESPONSE_CODE, &code);
  if (sink->on_line == nullptr || code != 200) {
    sink->body.append(data, n);
    return n;
  }
  sink->partial.append(data, n);
  size_t start = 0;
  for (size_t nl; (nl = sink->partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(sink->partial.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (!(*sink->on_line)(line)) {
      sink->stopped_by_callback = true;
      return 0;  // CURLE_WRITE_ERROR ends the transfer
    }
  }
  sink->partial.erase(0, start);
  return n;
}

// A gateway error body: {"error": "...", "message": "...", "code": 11}.
absl::Status StatusFromErrorBody(long http_status, const std::string& body,
                                 const std::string& url) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (!doc.HasParseError() && doc.IsObject()) {
    auto code_it = doc.FindMember("code");
    auto msg_it = doc.FindMember("message");
    if (code_it != doc.MemberEnd() && code_it->value.IsInt() && msg_it != doc.MemberEnd() &&
        msg_it->value.IsString()) {
      int code = code_it->value.GetInt();
      if (code <= 0 || code > 16) code = static_cast<int>(absl::StatusCode::kUnknown);
      const absl::string_view message = msg_it->value.GetString();
      if (code == static_cast<int>(absl::StatusCode::kUnavailable) &&
          absl::StartsWith(url, "https://") && !absl::StartsWith(message, "etcdserver:")) {
        // Not etcd's own Unavailable ("etcdserver: no leader") but the gateway's
        // gRPC connection to etcd: the gateway dials etcd's own gRPC port with
        // etcd's serving certificate as its client certificate (etcd 3.4,
        // embed/serve.go), and with --client-cert-auth=true a certificate
        // without clientAuth is refused: every call then answers "connection
        // closed" or "connection error: ... connection reset by peer".
        // kube-apiserver speaks gRPC and never meets this.
        return absl::UnavailableError(absl::StrCat(
            "etcd ", url, ": ", message,
            ": etcd's JSON gateway could not reach etcd's own gRPC service; if this persists, "
            "TLS inside etcd fails: etcd 3.4 with --client-cert-auth=true presents its "
            "--cert-file to itself as a client certificate, so that certificate needs "
            "extendedKeyUsage clientAuth as well as serverAuth"));
      }
      return absl::Status(static_cast<absl::StatusCode>(code), message);
    }
  }
  return absl::UnknownError(
      absl::StrCat("etcd ", url, ": HTTP ", http_status, ": ", body.substr(0, 300)));
}

// What a failed transfer most likely means when TLS is the cause, in the terms
// of the flags that set TLS up (--etcd-cafile, --etcd-certfile, --etcd-keyfile),
// or "" when TLS is not the matter. `fresh`: the transfer opened its connection
// itself, so a drop before any HTTP answer happened at connection set-up, not
// mid-call on a kept-alive connection. etcd with --client-cert-auth=true ends
// the connection of a client without an acceptable certificate: before the
// handshake completes in TLS 1.2 (an "alert bad certificate"), after it in
// TLS 1.3, where curl then reports a send or receive error, varying with timing.
std::string TlsHint(CURLcode rc, const std::string& url, bool fresh, long http_status,
                    const char* errbuf, const Etcd3ClientOptions& o) {
  const bool https = absl::StartsWith(url, "https://");
  const absl::string_view detail(errbuf);
  auto client_cert = [&] {
    return absl::StrCat(
        "TLS: etcd closed the new connection without an answer, as etcd with "
        "--client-cert-auth=true does when the client certificate is missing or not signed "
        "by its --trusted-ca-file: ",
        o.cert_file.empty() ? "no client certificate was given (--etcd-certfile, --etcd-keyfile)"
                            : absl::StrCat("check that --etcd-certfile=", o.cert_file,
                                           " is signed by etcd's --trusted-ca-file"));
  };
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ISSUER_ERROR:
      return absl::StrCat(
          "TLS: etcd's serving certificate was not accepted: it must be signed by ",
          o.ca_file.empty() ? "a CA of the system trust store (no --etcd-cafile was given)"
                            : absl::StrCat("the CA in --etcd-cafile=", o.ca_file),
          " and name the host of the --etcd-servers URL");
    case CURLE_SSL_CACERT_BADFILE:
      return absl::StrCat("TLS: cannot load the CA bundle --etcd-cafile=", o.ca_file);
    case CURLE_SSL_CERTPROBLEM:
      return absl::StrCat("TLS: cannot load the client certificate --etcd-certfile=", o.cert_file,
                          " with its key --etcd-keyfile=", o.key_file,
                          " (PEM files; the key must belong to the certificate)");
    case CURLE_SSL_CLIENTCERT:
      return client_cert();
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
      if (!fresh || http_status != 0) return "";
      if (!https) {
        return rc == CURLE_SEND_ERROR || rc == CURLE_SSL_CONNECT_ERROR
                   ? ""
                   : "etcd closed the connection without an answer: if it serves TLS on this "
                     "port, use an https:// URL with --etcd-cafile, --etcd-certfile and "
                     "--etcd-keyfile";
      }
      if (rc == CURLE_SSL_CONNECT_ERROR && !absl::StrContains(detail, "certificate") &&
          !absl::StrContains(detail, "unknown ca")) {
        return "TLS: the handshake with etcd failed: is etcd serving TLS on this port (if not, "
               "use an http:// URL)?";
      }
      return client_cert();
    default:
      return "";
  }
}

// "<url>: <hint> (curl: <error>)", or "<url>: <error>" when there is no hint.
std::string DescribeFailure(CURLcode rc, CURL* curl, const std::string& endpoint,
                            const std::string& url, long http_status, const char* errbuf,
                            const Etcd3ClientOptions& o) {
  long connects = 0;
  curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
  const std::string error = absl::StrCat(curl_easy_strerror(rc),
                                         errbuf[0] ? absl::StrCat(" (", errbuf, ")") : "");
  const std::string hint = TlsHint(rc, url, connects > 0, http_status, errbuf, o);
  if (hint.empty()) return absl::StrCat(endpoint, ": ", error);
  return absl::StrCat(endpoint, ": ", hint, " (curl: ", error, ")");
}

bool NotSent(CURLcode rc) {
  return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
         rc == CURLE_COULDNT_RESOLVE_PROXY;
}

}  // namespace

void Etcd3StreamControl::Stop() {
  stopped_.store(true);
  absl::MutexLock lock(&mu_);
  if (multi_ != nullptr) curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

absl::StatusOr<std::unique_ptr<Etcd3Client>> Etcd3Client::New(Etcd3ClientOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoint given");
  const bool tls = !options.ca_file.empty() || !options.cert_file.empty();
  std::vector<std::string> endpoints;
  for (std::string e : options.endpoints) {
    while (!e.empty() && e.back() == '/') e.pop_back();
    if (e.empty()) continue;
    if (!absl::StartsWith(e, "http://") && !absl::StartsWith(e, "https://")) {
      e = absl::StrCat(tls ? "https://" : "http://", e);
    }
    endpoints.push_back(std::move(e));
  }
  if (endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoint given");
  GlobalInit();
  return std::unique_ptr<Etcd3Client>(new Etcd3Client(std::move(options), std::move(endpoints)));
}

Etcd3Client::Etcd3Client(Etcd3ClientOptions options, std::vector<std::string> endpoints)
    : options_(std::move(options)), endpoints_(std::move(endpoints)) {}

Etcd3Client::~Etcd3Client() {
  absl::MutexLock lock(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
  idle_.clear();
}

void* Etcd3Client::AcquireHandle() {
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

void Etcd3Client::ReleaseHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  if (idle_.size() < 32) {
    idle_.push_back(handle);
    return;
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

void Etcd3Client::Configure(void* handle, const std::string& url, std::string_view body,
                            bool streaming) {
  CURL* curl = static_cast<CURL*>(handle);
  // reset keeps the handle's connection cache: sequential calls reuse a
  // connection.
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  if (!options_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (!options_.cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, options_.cert_file.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!options_.key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, options_.key_file.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
  const long connect_ms = static_cast<long>(std::min<int64_t>(options_.timeout.count(), 5'000));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
  if (!streaming) {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnData);
  // No "Expect: 100-continue" round trip before larger bodies (a txn with an object).
  static curl_slist* const kHeaders = [] {
    curl_slist* h = curl_slist_append(nullptr, "Content-Type: application/json");
    return curl_slist_append(h, "Expect:");
  }();
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, kHeaders);
}

absl::StatusOr<rapidjson::Document> Etcd3Client::Call(std::string_view path, std::string_view body,
                                                      bool idempotent) {
  const size_t n = endpoints_.size();
  const size_t first = preferred_.load() % n;
  std::string failures;
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (first + i) % n;
    const std::string url = absl::StrCat(endpoints_[index], base::Av(path));
    void* h = AcquireHandle();
    if (h == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
    CURL* curl = static_cast<CURL*>(h);
    Configure(h, url, body, /*streaming=*/false);
    Sink sink;
    sink.curl = curl;
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    const CURLcode rc = curl_easy_perform(curl);
    long http_status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
    if (rc != CURLE_OK) {
      absl::StrAppend(&failures, failures.empty() ? "" : "; ",
                      DescribeFailure(rc, curl, endpoints_[index], url, http_status, errbuf,
                                      options_));
      // A half-used connection must not be reused.
      curl_easy_cleanup(curl);
      if (NotSent(rc) || idempotent) continue;
      return absl::UnavailableError(absl::StrCat("etcd call ", base::Av(path),
                                                 " failed after it was sent (it may have been "
                                                 "applied): ",
                                                 failures));
    }
    ReleaseHandle(h);
    preferred_.store(index);
    if (http_status != 200) return StatusFromErrorBody(http_status, sink.body, url);
    rapidjson::Document doc;
    doc.Parse(sink.body.data(), sink.body.size());
    if (doc.HasParseError() || !doc.IsObject()) {
      return absl::InternalError(
          absl::StrCat("etcd ", url, ": unreadable answer: ", sink.body.substr(0, 200)));
    }
    return doc;
  }
  return absl::UnavailableError(absl::StrCat("etcd unreachable: ", failures));
}

absl::Status Etcd3Client::Stream(std::string_view path, std::string_view body,
                                 const std::function<bool(std::string_view)>& on_line,
                                 Etcd3StreamControl* control) {
  const size_t index = preferred_.load() % endpoints_.size();
  const std::string url = absl::StrCat(endpoints_[index], base::Av(path));
  CURL* curl = curl_easy_init();
  CURLM* multi = curl_multi_init();
  if (curl == nullptr || multi == nullptr) {
    if (curl != nullptr) curl_easy_cleanup(curl);
    if (multi != nullptr) curl_multi_cleanup(multi);
    return absl::ResourceExhaustedError("curl init failed");
  }
  Configure(curl, url, body, /*streaming=*/true);
  Sink sink;
  sink.curl = curl;
  sink.on_line = &on_line;
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_multi_add_handle(multi, curl);
  {
    absl::MutexLock lock(&control->mu_);
    control->multi_ = multi;
  }

  CURLcode result = CURLE_OK;
  bool done = false;
  while (!control->stopped()) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        result = msg->data.result;
        done = true;
      }
    }
    if (done || running == 0) break;
    curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
  }

  {
    absl::MutexLock lock(&control->mu_);
    control->multi_ = nullptr;
  }
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  const std::string failure =
      done && result != CURLE_OK
          ? DescribeFailure(result, curl, url, url, http_status, errbuf, options_)
          : std::string();
  curl_multi_remove_handle(multi, curl);
  curl_easy_cleanup(curl);
  curl_multi_cleanup(multi);

  if (control->stopped() || sink.stopped_by_callback) return absl::OkStatus();
  if (!failure.empty()) return absl::UnavailableError(absl::StrCat("etcd watch stream ", failure));
  if (http_status != 200) return StatusFromErrorBody(http_status, sink.body, url);
  return absl::OkStatus();
}

}  // namespace poolcoord::store
