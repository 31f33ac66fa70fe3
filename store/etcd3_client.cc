#include "store/etcd3_client.h"

#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_view.h"

namespace poolcoord::store {
namespace {


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

// etcd's refusal of a call that requires a leader (the hasleader metadata every
// call carries) by a member that has none: given before the call runs, so
// any call may go on to another member.
bool NoLeader(const absl::Status& s) {
  return absl::IsUnavailable(s) && absl::StrContains(s.message(), "etcdserver: no leader");
}

// etcd's own Unavailable ("etcdserver: request timed out", "... leader
// changed"): the member could not serve the call in time, typically because it
// lost its leader while the call waited. A read may go on to another member; a
// txn may have been applied.
bool MemberUnavailable(const absl::Status& s) {
  return absl::IsUnavailable(s) && absl::StartsWith(s.message(), "etcdserver:");
}

// What a failed transfer most likely means when TLS is the cause, in the terms
// of the flags that set TLS up (--etcd-cafile, --etcd-certfile, --etcd-keyfile),
// or "" when TLS is not the matter. `fresh`: the transfer opened its connection
// itself, so a drop before any HTTP answer happened at connection set-up, not
// mid-call on a kept-alive connection. etcd with --client-cert-auth=true ends
// the connection of a client without an acceptable certificate: before the
// handshake completes in TLS 1.2 (an "alert bad certificate"), after it in
// TLS 1.3, where curl then reports a send or receive error, varying with timing.
std::string TlsHint(const base::TransferError& e, const std::string& url,
                    const Etcd3ClientOptions& o) {
  using base::TransferFailure;
  const bool https = absl::StartsWith(url, "https://");
  const bool fresh = e.fresh_connection;
  const long http_status = e.http_status;
  const absl::string_view detail(e.detail);
  auto client_cert = [&] {
    return absl::StrCat(
        "TLS: etcd closed the new connection without an answer, as etcd with "
        "--client-cert-auth=true does when the client certificate is missing or not signed "
        "by its --trusted-ca-file: ",
        o.cert_file.empty() ? "no client certificate was given (--etcd-certfile, --etcd-keyfile)"
                            : absl::StrCat("check that --etcd-certfile=", o.cert_file,
                                           " is signed by etcd's --trusted-ca-file"));
  };
  switch (e.kind) {
    case TransferFailure::kPeerVerification:
      return absl::StrCat(
          "TLS: etcd's serving certificate was not accepted: it must be signed by ",
          o.ca_file.empty() ? "a CA of the system trust store (no --etcd-cafile was given)"
                            : absl::StrCat("the CA in --etcd-cafile=", o.ca_file),
          " and name the host of the --etcd-servers URL");
    case TransferFailure::kCaFile:
      return absl::StrCat("TLS: cannot load the CA bundle --etcd-cafile=", o.ca_file);
    case TransferFailure::kClientCertProblem:
      return absl::StrCat("TLS: cannot load the client certificate --etcd-certfile=", o.cert_file,
                          " with its key --etcd-keyfile=", o.key_file,
                          " (PEM files; the key must belong to the certificate)");
    case TransferFailure::kClientCertRejected:
      return client_cert();
    case TransferFailure::kTlsHandshake:
    case TransferFailure::kSendReceive:
    case TransferFailure::kNothing:
      if (!fresh || http_status != 0) return "";
      if (!https) {
        return e.kind == TransferFailure::kSendReceive || e.kind == TransferFailure::kTlsHandshake
                   ? ""
                   : "etcd closed the connection without an answer: if it serves TLS on this "
                     "port, use an https:// URL with --etcd-cafile, --etcd-certfile and "
                     "--etcd-keyfile";
      }
      if (e.kind == TransferFailure::kTlsHandshake && !absl::StrContains(detail, "certificate") &&
          !absl::StrContains(detail, "unknown ca")) {
        return "TLS: the handshake with etcd failed: is etcd serving TLS on this port (if not, "
               "use an http:// URL)?";
      }
      return client_cert();
    default:
      return "";
  }
}

// "<endpoint>: <hint> (curl: <error>)", or "<endpoint>: <error>" when there is no hint.
std::string DescribeFailure(const base::TransferError& e, const std::string& endpoint,
                            const std::string& url, const Etcd3ClientOptions& o) {
  const std::string hint = TlsHint(e, url, o);
  if (hint.empty()) return absl::StrCat(endpoint, ": ", e.detail);
  return absl::StrCat(endpoint, ": ", hint, " (curl: ", e.detail, ")");
}

}  // namespace

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
  base::HttpTransportConfig t;
  t.tls.ca_file = options.ca_file;
  t.tls.cert_file = options.cert_file;
  t.tls.key_file = options.key_file;
  t.timeout = options.timeout;
  t.connect_timeout = std::min(options.timeout, std::chrono::milliseconds(5'000));
  t.max_idle_connections = 32;
  // A member that went silent (a partition drops its packets: no reset, no
  // error) is noticed within 5 + 3 x 5 s, as clientv3's keepalive does for
  // kube-apiserver (30 s + 10 s): a watch on it ends and is resumed on
  // another member, and its idle pooled connections go. Without it a watch
  // stream stayed silent for as long as TCP's retransmission backoff after the
  // link came back (21 s after a 30 s partition), and 10 minutes where it did
  // not come back.
  t.keepalive_idle = std::chrono::seconds(5);
  t.keepalive_interval = std::chrono::seconds(5);
  t.keepalive_probes = 3;
  t.user_agent = "poolcoord-etcd3";
  // No retries here: Call moves on to the next endpoint itself, and knows
  // which calls may run twice.
  t.retry.max_attempts = 1;
  return std::unique_ptr<Etcd3Client>(new Etcd3Client(std::move(options), std::move(endpoints),
                                                      base::HttpTransport::New(std::move(t))));
}

Etcd3Client::Etcd3Client(Etcd3ClientOptions options, std::vector<std::string> endpoints,
                         std::unique_ptr<base::HttpTransport> transport)
    : options_(std::move(options)),
      endpoints_(std::move(endpoints)),
      transport_(std::move(transport)) {}

Etcd3Client::~Etcd3Client() = default;

base::HttpRequest Etcd3Client::Request(const std::string& url, std::string_view body) const {
  base::HttpRequest r;
  r.method = "POST";
  r.url = url;
  r.body = std::string(body);
  r.accept.clear();  // the gateway answers JSON whatever is asked
  // gRPC metadata through the gateway: etcd then refuses a call at once on a
  // member without a leader, and cancels a watch when its member loses the
  // leader (clientv3.WithRequireLeader; kube-apiserver's watches carry it).
  // Without it a member cut off from its peers keeps a watch open and silent
  // for the whole partition, and holds each read until etcd's own timeout.
  r.headers.push_back("Grpc-Metadata-hasleader: true");
  return r;
}

absl::StatusOr<rapidjson::Document> Etcd3Client::Call(std::string_view path, std::string_view body,
                                                      bool idempotent) {
  const size_t n = endpoints_.size();
  const size_t first = preferred_.load() % n;
  std::string failures;
  // One budget for the whole call, not one per member: with every member
  // silent (this replica cut off) the call fails after the timeout, not after
  // three of them.
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (first + i) % n;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      absl::StrAppend(&failures, failures.empty() ? "" : "; ", "no time left for ",
                      endpoints_[index], " within ", options_.timeout.count(), " ms");
      break;
    }
    const std::string url = absl::StrCat(endpoints_[index], base::Av(path));
    base::TransferError error;
    base::HttpRequest request = Request(url, body);
    request.timeout = left;
    absl::StatusOr<base::HttpResponse> r = transport_->Do(request, &error);
    if (!r.ok()) {
      absl::StrAppend(&failures, failures.empty() ? "" : "; ",
                      DescribeFailure(error, endpoints_[index], url, options_));
      if (error.kind == base::TransferFailure::kConnect || idempotent) continue;
      return absl::UnavailableError(absl::StrCat("etcd call ", base::Av(path),
                                                 " failed after it was sent (it may have been "
                                                 "applied): ",
                                                 failures));
    }
    if (r->status != 200) {
      absl::Status s = StatusFromErrorBody(r->status, r->body, url);
      if (NoLeader(s) || (idempotent && MemberUnavailable(s))) {
        absl::StrAppend(&failures, failures.empty() ? "" : "; ", endpoints_[index], ": ",
                        s.message());
        continue;
      }
      preferred_.store(index);
      return s;
    }
    preferred_.store(index);
    rapidjson::Document doc;
    doc.Parse(r->body.data(), r->body.size());
    if (doc.HasParseError() || !doc.IsObject()) {
      return absl::InternalError(
          absl::StrCat("etcd ", url, ": unreadable answer: ", r->body.substr(0, 200)));
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
  base::HttpResponse response;
  base::TransferError error;
  absl::Status s = transport_->Stream(Request(url, body), on_line, control, &response, &error);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("etcd watch stream ", DescribeFailure(error, url, url, options_)));
  }
  if (control->stopped()) return absl::OkStatus();
  if (response.status != 0 && response.status != 200) {
    return StatusFromErrorBody(response.status, response.body, url);
  }
  return absl::OkStatus();
}

}  // namespace poolcoord::store
