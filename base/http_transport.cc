#include "base/http_transport.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_view.h"

namespace poolcoord::base {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Collects a body, or in streaming mode hands complete lines of a 200 answer on.
struct Sink {
  CURL* curl = nullptr;
  std::string* body = nullptr;
  const std::function<bool(std::string_view)>* on_line = nullptr;
  std::string partial;  // streaming: the unterminated tail
  bool stopped_by_callback = false;
  std::string retry_after;
  std::string date;
};

size_t OnData(char* data, size_t size, size_t nmemb, void* userp) {
  auto* sink = static_cast<Sink*>(userp);
  const size_t n = size * nmemb;
  long code = 0;
  if (sink->on_line != nullptr) curl_easy_getinfo(sink->curl, CURLINFO_RESPONSE_CODE, &code);
  if (sink->on_line == nullptr || code != 200) {
    sink->body->append(data, n);
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

size_t OnHeader(char* data, size_t size, size_t nmemb, void* userp) {
  auto* sink = static_cast<Sink*>(userp);
  const size_t n = size * nmemb;
  absl::string_view line(data, n);
  if (absl::StartsWithIgnoreCase(line, "retry-after:")) {
    line.remove_prefix(sizeof("retry-after:") - 1);
    sink->retry_after = std::string(absl::StripAsciiWhitespace(line));
  } else if (absl::StartsWithIgnoreCase(line, "date:")) {
    line.remove_prefix(sizeof("date:") - 1);
    sink->date = std::string(absl::StripAsciiWhitespace(line));
  }
  return n;
}

curl_blob Blob(const std::string& s) {
  return curl_blob{const_cast<char*>(s.data()), s.size(), CURL_BLOB_NOCOPY};
}

TransferFailure Classify(CURLcode rc) {
  switch (rc) {
    case CURLE_OK:
      return TransferFailure::kNone;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return TransferFailure::kConnect;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ISSUER_ERROR:
      return TransferFailure::kPeerVerification;
    case CURLE_SSL_CACERT_BADFILE:
      return TransferFailure::kCaFile;
    case CURLE_SSL_CERTPROBLEM:
      return TransferFailure::kClientCertProblem;
    case CURLE_SSL_CLIENTCERT:
      return TransferFailure::kClientCertRejected;
    case CURLE_SSL_CONNECT_ERROR:
      return TransferFailure::kTlsHandshake;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
      return TransferFailure::kSendReceive;
    case CURLE_GOT_NOTHING:
      return TransferFailure::kNothing;
    case CURLE_OPERATION_TIMEDOUT:
      return TransferFailure::kTimeout;
    case CURLE_ABORTED_BY_CALLBACK:
      return TransferFailure::kCancelled;
    default:
      return TransferFailure::kOther;
  }
}

// CURLOPT_SOCKOPTFUNCTION: the keepalive probe count, which libcurl 7.88 does
// not set itself (CURLOPT_TCP_KEEPCNT came in 8.9).
int SetKeepaliveProbes(void* probes, curl_socket_t fd, curlsocktype purpose) {
  if (purpose == CURLSOCKTYPE_IPCXN) {
    const int n = *static_cast<const int*>(probes);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &n, sizeof n);
  }
  return CURL_SOCKOPT_OK;
}

// Sets every option of one transfer; `headers` and `blobs` must outlive it.
void Configure(CURL* curl, const HttpTransportConfig& config, const HttpRequest& request,
               std::chrono::milliseconds timeout, curl_slist** headers, curl_blob blobs[3]) {
  // reset keeps the connection cache and TLS session of the handle: that is the
  // keep-alive reuse the pool exists for.
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, static_cast<long>(config.keepalive_idle.count()));
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL,
                   static_cast<long>(config.keepalive_interval.count()));
  if (config.keepalive_probes > 0) {
    curl_easy_setopt(curl, CURLOPT_SOCKOPTFUNCTION, SetKeepaliveProbes);
    curl_easy_setopt(curl, CURLOPT_SOCKOPTDATA, const_cast<int*>(&config.keepalive_probes));
  }
  curl_easy_setopt(curl, CURLOPT_USERAGENT, config.user_agent.c_str());
  const std::string& m = request.method;
  const bool write_verb = m == "POST" || m == "PUT" || m == "PATCH";
  if (m == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else if (m == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, m.c_str());
  }
  if (!request.body.empty() || write_verb) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  }

  const TlsClientConfig& tls = config.tls;
  if (!tls.ca_data.empty()) {
    blobs[0] = Blob(tls.ca_data);
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &blobs[0]);
  } else if (!tls.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, tls.ca_file.c_str());
  }
  if (!tls.cert_data.empty()) {
    blobs[1] = Blob(tls.cert_data);
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &blobs[1]);
  } else if (!tls.cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, tls.cert_file.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  if (!tls.key_data.empty()) {
    blobs[2] = Blob(tls.key_data);
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &blobs[2]);
  } else if (!tls.key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, tls.key_file.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  if (tls.insecure_skip_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }

  if (!request.accept.empty()) {
    *headers = curl_slist_append(*headers, absl::StrCat("Accept: ", request.accept).c_str());
  }
  if (!request.body.empty() || write_verb) {
    *headers =
        curl_slist_append(*headers, absl::StrCat("Content-Type: ", request.content_type).c_str());
  }
  // libcurl would otherwise wait for "100 Continue" on larger bodies.
  *headers = curl_slist_append(*headers, "Expect:");
  const std::string& token =
      request.bearer_token.empty() ? config.bearer_token : request.bearer_token;
  if (!token.empty()) {
    *headers = curl_slist_append(*headers, absl::StrCat("Authorization: Bearer ", token).c_str());
  }
  for (const std::string& line : request.headers) {
    *headers = curl_slist_append(*headers, line.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, *headers);

  const long connect_ms =
      static_cast<long>(timeout.count() > 0 ? std::min(timeout, config.connect_timeout).count()
                                            : config.connect_timeout.count());
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
  if (timeout.count() > 0)
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
}

TransferError Describe(CURLcode rc, CURL* curl, long http_status, const char* errbuf) {
  TransferError e;
  e.kind = Classify(rc);
  long connects = 0;
  curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
  e.fresh_connection = connects > 0;
  e.http_status = http_status;
  e.detail = absl::StrCat(curl_easy_strerror(rc), errbuf[0] ? absl::StrCat(" (", errbuf, ")") : "");
  return e;
}

absl::Status ErrorStatus(const HttpRequest& request, const TransferError& e) {
  const std::string message = absl::StrCat(request.method, " ", request.url, ": ", e.detail);
  if (e.kind == TransferFailure::kTimeout) return absl::DeadlineExceededError(message);
  if (e.kind == TransferFailure::kCancelled) return absl::CancelledError(message);
  return absl::UnavailableError(message);
}

bool RetriableStatus(int status) { return status == 429 || status == 502 || status == 503; }

}  // namespace

void StreamControl::Stop() {
  stopped_ = true;
  absl::MutexLock lock(&mu_);
  if (multi_ != nullptr) curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

std::unique_ptr<HttpTransport> HttpTransport::New(HttpTransportConfig config) {
  GlobalInit();
  return std::unique_ptr<HttpTransport>(new HttpTransport(std::move(config)));
}

HttpTransport::HttpTransport(HttpTransportConfig config) : config_(std::move(config)) {}

HttpTransport::~HttpTransport() {
  absl::MutexLock lock(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
  idle_.clear();
}

void* HttpTransport::AcquireHandle() {
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

void HttpTransport::ReleaseHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(idle_.size()) < config_.max_idle_connections) {
    idle_.push_back(handle);
    return;
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

absl::StatusOr<HttpResponse> HttpTransport::DoOnce(const HttpRequest& request,
                                                   std::chrono::milliseconds timeout,
                                                   TransferError* error) {
  CURL* curl = static_cast<CURL*>(AcquireHandle());
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  curl_slist* headers = nullptr;
  curl_blob blobs[3];
  Configure(curl, config_, request, timeout, &headers, blobs);
  HttpResponse response;
  Sink sink;
  sink.curl = curl;
  sink.body = &response.body;
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &sink);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  if (rc != CURLE_OK) {
    TransferError e = Describe(rc, curl, status, errbuf);
    // A failed transfer may leave a half-used connection: never reuse it.
    curl_easy_cleanup(curl);
    absl::Status s = ErrorStatus(request, e);
    if (error != nullptr) *error = std::move(e);
    return s;
  }
  ReleaseHandle(curl);
  response.status = static_cast<int>(status);
  response.retry_after = std::move(sink.retry_after);
  response.date = std::move(sink.date);
  return response;
}

absl::StatusOr<HttpResponse> HttpTransport::Do(const HttpRequest& request, TransferError* error) {
  const std::string& m = request.method;
  const bool idempotent =
      request.idempotent.value_or(m == "GET" || m == "HEAD" || m == "PUT" || m == "DELETE");
  const int attempts = idempotent ? std::max(1, config_.retry.max_attempts) : 1;
  const std::chrono::milliseconds total =
      request.timeout.count() > 0 ? request.timeout : config_.timeout;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::milliseconds backoff = config_.retry.initial_backoff;
  thread_local std::minstd_rand jitter(std::random_device{}());
  for (int attempt = 1;; ++attempt) {
    std::chrono::milliseconds left = total;
    if (total.count() > 0) {
      left = total - std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - start);
      if (left.count() <= 0) left = std::chrono::milliseconds(1);
    }
    TransferError e;
    absl::StatusOr<HttpResponse> r = DoOnce(request, left, &e);
    const bool retriable =
        r.ok() ? RetriableStatus(r->status)
               : (e.kind != TransferFailure::kTimeout && e.kind != TransferFailure::kCancelled &&
                  e.kind != TransferFailure::kCaFile &&
                  e.kind != TransferFailure::kClientCertProblem &&
                  e.kind != TransferFailure::kPeerVerification);
    if (attempt >= attempts || !retriable) {
      if (!r.ok() && error != nullptr) *error = std::move(e);
      return r;
    }
    std::uniform_int_distribution<int64_t> pick(backoff.count() / 2, backoff.count());
    const auto wait = std::chrono::milliseconds(pick(jitter));
    if (total.count() > 0 && std::chrono::steady_clock::now() - start + wait >= total) {
      if (!r.ok() && error != nullptr) *error = std::move(e);
      return r;
    }
    std::this_thread::sleep_for(wait);
    backoff = std::min(backoff * 2, config_.retry.max_backoff);
  }
}

absl::Status HttpTransport::Stream(const HttpRequest& request,
                                   const std::function<bool(std::string_view)>& on_line,
                                   StreamControl* control, HttpResponse* response,
                                   TransferError* error) {
  if (control != nullptr && control->stopped()) return absl::OkStatus();
  // A stream ends mid-connection by design: it gets a handle of its own, never pooled.
  CURL* curl = curl_easy_init();
  CURLM* multi = curl_multi_init();
  if (curl == nullptr || multi == nullptr) {
    if (curl != nullptr) curl_easy_cleanup(curl);
    if (multi != nullptr) curl_multi_cleanup(multi);
    return absl::ResourceExhaustedError("curl init failed");
  }
  curl_slist* headers = nullptr;
  curl_blob blobs[3];
  Configure(curl, config_, request, request.timeout, &headers, blobs);
  response->body.clear();
  Sink sink;
  sink.curl = curl;
  sink.body = &response->body;
  sink.on_line = &on_line;
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &sink);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_multi_add_handle(multi, curl);
  if (control != nullptr) {
    absl::MutexLock lock(&control->mu_);
    control->multi_ = multi;
  }
  CURLcode result = CURLE_OK;
  bool done = false;
  while (control == nullptr || !control->stopped()) {
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
  if (control != nullptr) {
    absl::MutexLock lock(&control->mu_);
    control->multi_ = nullptr;
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  TransferError e;
  if (done && result != CURLE_OK) e = Describe(result, curl, status, errbuf);
  curl_multi_remove_handle(multi, curl);
  curl_easy_cleanup(curl);
  curl_multi_cleanup(multi);
  curl_slist_free_all(headers);
  response->status = static_cast<int>(status);
  response->retry_after = std::move(sink.retry_after);
  response->date = std::move(sink.date);
  if ((control != nullptr && control->stopped()) || sink.stopped_by_callback)
    return absl::OkStatus();
  if (e.kind != TransferFailure::kNone) {
    absl::Status s = ErrorStatus(request, e);
    if (error != nullptr) *error = std::move(e);
    return s;
  }
  if (status != 200) response->body.append(sink.partial);
  return absl::OkStatus();
}

}  // namespace poolcoord::base
