#include "apiservice/tls_server.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "apiservice/http_session.h"
#include "apiservice/openssl_ptr.h"
#include "apiservice/pki.h"

namespace poolcoord::apiservice {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using internal::Session;
using internal::Shared;
using internal::StreamWaker;

int AlpnSelect(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof(kHttp11), in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  // No http/1.1 offered: carry on without ALPN rather than fail the handshake.
  return SSL_TLSEXT_ERR_NOACK;
}

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

// What the TLS context is built from; replaced as a whole.
struct TlsMaterial {
  std::string chain_pem;
  std::string key_pem;
  std::string client_ca_pem;  // whose subjects the CertificateRequest names
};

std::vector<X509Ptr> ReadPemCertificates(const std::string& pem) {
  std::vector<X509Ptr> out;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    out.emplace_back(cert);
  }
  ERR_clear_error();
  return out;
}

// A server context for `m`. Contexts are immutable once built: a change builds
// a new one, which new connections take (each SSL holds its context).
absl::StatusOr<std::shared_ptr<SSL_CTX>> BuildContext(const TlsMaterial& m) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SslCtxFree());
  if (!ctx) return absl::InternalError(absl::StrCat("TLS context: ", OpenSslError()));
  SSL_CTX* native = ctx.get();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION |
                                  SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                               SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Whole records in one recv where the socket has them (fewer system calls).
  SSL_CTX_set_read_ahead(native, 1);
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);

  std::vector<X509Ptr> chain = ReadPemCertificates(m.chain_pem);
  if (chain.empty()) return absl::InvalidArgumentError("no PEM certificate");
  BioPtr key_bio(BIO_new_mem_buf(m.key_pem.data(), static_cast<int>(m.key_pem.size())));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) return absl::InvalidArgumentError(absl::StrCat("key: ", OpenSslError()));
  STACK_OF(X509)* extra = sk_X509_new_null();
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(extra, chain[i].get());
  const int used = SSL_CTX_use_cert_and_key(native, chain[0].get(), key, extra, 1);
  sk_X509_free(extra);  // the context took its own references
  EVP_PKEY_free(key);
  if (used != 1) return absl::InvalidArgumentError(OpenSslError());
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the certificate does not match the key");
  }
  // Request, never require: the authenticator verifies against the right CA.
  SSL_CTX_set_verify(native, SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
  if (!m.client_ca_pem.empty()) {
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new(
        [](const X509_NAME* const* a, const X509_NAME* const* b) { return X509_NAME_cmp(*a, *b); });
    for (const X509Ptr& ca : ReadPemCertificates(m.client_ca_pem)) {
      X509_NAME* name = X509_get_subject_name(ca.get());
      if (sk_X509_NAME_find(names, name) >= 0) continue;  // named once
      sk_X509_NAME_push(names, X509_NAME_dup(name));
    }
    SSL_CTX_set_client_CA_list(native, names);  // takes ownership
  }
  static const unsigned char kSessionContext[] = "poolcoord";
  SSL_CTX_set_session_id_context(native, kSessionContext, sizeof(kSessionContext) - 1);
  SSL_CTX_set_alpn_select_cb(native, AlpnSelect, nullptr);
  ERR_clear_error();
  return ctx;
}

// After this many connections closed (counted from the most open since the
// last trim), freed memory is handed back to the system. glibc keeps freed
// small blocks in its heaps, and a few live blocks spread over them pin whole
// pages: after 2,000 idle TLS connections closed, the resident set stayed at
// its peak.
constexpr int kTrimAfterClosedConnections = 64;
constexpr std::chrono::seconds kTrimCheckPeriod{2};

}  // namespace

struct TlsServer::Impl {
  std::shared_ptr<Shared> shared;
  net::io_context ioc;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  net::steady_timer trim_timer{acceptor.get_executor()};
  int peak_open = 0;  // on the acceptor's strand
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  int port = 0;
  absl::Mutex shutdown_mu;
  bool shut_down ABSL_GUARDED_BY(shutdown_mu) = false;
  absl::Mutex threads_mu;
  int running_threads ABSL_GUARDED_BY(threads_mu) = 0;
  absl::Mutex ctx_mu;
  TlsMaterial material ABSL_GUARDED_BY(ctx_mu);
  std::shared_ptr<SSL_CTX> ctx ABSL_GUARDED_BY(ctx_mu);
  // After ioc: destroyed (stopped and joined) first, since its handlers post
  // their answers to ioc.
  std::optional<net::thread_pool> handler_pool;

  explicit Impl(int threads_hint) : ioc(threads_hint) {}
  ~Impl() {
    beast::error_code ignored;
    acceptor.close(ignored);
  }

  std::shared_ptr<SSL_CTX> Context() {
    absl::MutexLock lock(&ctx_mu);
    return ctx;
  }

  // Builds a context from the current material changed by `change`; keeps the
  // old one when that fails.
  absl::Status Replace(const std::function<void(TlsMaterial*)>& change) {
    absl::MutexLock lock(&ctx_mu);
    TlsMaterial next = material;
    change(&next);
    absl::StatusOr<std::shared_ptr<SSL_CTX>> built = BuildContext(next);
    if (!built.ok()) return built.status();
    material = std::move(next);
    ctx = *std::move(built);
    return absl::OkStatus();
  }

  absl::Status Init() {
    const TlsServerOptions& o = shared->options;
    TlsMaterial initial;
    absl::StatusOr<std::string> chain = ReadFileToString(o.cert_file);
    if (!chain.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("serving certificate ", o.cert_file, ": ", chain.status().message()));
    }
    absl::StatusOr<std::string> key = ReadFileToString(o.key_file);
    if (!key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("serving key ", o.key_file, ": ", key.status().message()));
    }
    initial.chain_pem = *std::move(chain);
    initial.key_pem = *std::move(key);
    for (const std::string& file : o.client_ca_files) {
      absl::StatusOr<std::string> pem = ReadFileToString(file);
      if (!pem.ok() || ReadPemCertificates(*pem).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "client CA bundle ", file, ": ",
            pem.ok() ? "no PEM certificate" : std::string(pem.status().message())));
      }
      absl::StrAppend(&initial.client_ca_pem, *pem, "\n");
    }
    if (absl::Status st = Replace([&](TlsMaterial* m) { *m = std::move(initial); }); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("serving certificate ", o.cert_file,
                                                     " / key ", o.key_file, ": ", st.message()));
    }

    beast::error_code ec;
    net::ip::address address = net::ip::make_address(o.bind_address, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("bind address \"", o.bind_address, "\" is not an IP address"));
    }
    tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", o.bind_address, ":",
                                                 o.port, ": ", ec.message()));
    }
    port = acceptor.local_endpoint().port();
    return absl::OkStatus();
  }

  void DoAccept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (shared->shutting_down.load() || !acceptor.is_open()) return;
      if (ec) {
        // Out of descriptors and the like: back off instead of spinning.
        auto timer = std::make_shared<net::steady_timer>(acceptor.get_executor());
        timer->expires_after(std::chrono::milliseconds(100));
        timer->async_wait([this, timer](beast::error_code) { DoAccept(); });
        return;
      }
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::shared_ptr<SSL_CTX> current = Context();
      std::make_shared<Session>(std::move(socket), current.get(), shared)->Start();
      {
        absl::MutexLock lock(&shared->mu);
        peak_open = std::max(peak_open, static_cast<int>(shared->sessions.size()));
      }
      DoAccept();
    });
  }

  // On the acceptor's strand, every kTrimCheckPeriod.
  void ScheduleTrim() {
    trim_timer.expires_after(kTrimCheckPeriod);
    trim_timer.async_wait([this](beast::error_code ec) {
      if (ec || shared->shutting_down.load()) return;
      int open;
      {
        absl::MutexLock lock(&shared->mu);
        open = static_cast<int>(shared->sessions.size());
      }
      peak_open = std::max(peak_open, open);
      if (peak_open - open >= kTrimAfterClosedConnections) {
        malloc_trim(0);
        peak_open = open;
      }
      ScheduleTrim();
    });
  }

  void RunThreads(int n) {
    work.emplace(ioc.get_executor());
    {
      absl::MutexLock lock(&threads_mu);
      running_threads = n;
    }
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([this] {
        for (;;) {
          try {
            ioc.run();
            break;
          } catch (...) {
            // A handler threw through Asio; keep serving the others.
          }
        }
        absl::MutexLock lock(&threads_mu);
        --running_threads;
      });
    }
  }
};

TlsServer::TlsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<TlsServer>> TlsServer::Start(TlsServerOptions options,
                                                            RequestHandler handler) {
  int threads = options.io_threads > 0
                    ? options.io_threads
                    : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  auto impl = std::make_unique<Impl>(threads);
  impl->shared = std::make_shared<Shared>();
  impl->shared->options = std::move(options);
  impl->shared->handler = std::move(handler);
  impl->shared->waker = std::make_unique<StreamWaker>(impl->ioc.get_executor());
  if (absl::Status st = impl->Init(); !st.ok()) return st;
  if (impl->shared->options.handler_threads > 0) {
    impl->handler_pool.emplace(static_cast<size_t>(impl->shared->options.handler_threads));
    impl->shared->handler_pool = &*impl->handler_pool;
  }
  impl->DoAccept();
  impl->ScheduleTrim();
  impl->RunThreads(threads);
  return std::unique_ptr<TlsServer>(new TlsServer(std::move(impl)));
}

TlsServer::~TlsServer() { Shutdown(std::chrono::milliseconds(0)); }

int TlsServer::port() const { return impl_->port; }

int TlsServer::ActiveRequests() const {
  absl::MutexLock lock(&impl_->shared->mu);
  return impl_->shared->active_requests;
}

int TlsServer::OpenConnections() const {
  absl::MutexLock lock(&impl_->shared->mu);
  return static_cast<int>(impl_->shared->sessions.size());
}

absl::Status TlsServer::SetServingCertificate(const std::string& chain_pem,
                                              const std::string& key_pem) {
  absl::Status st = impl_->Replace([&](TlsMaterial* m) {
    m->chain_pem = chain_pem;
    m->key_pem = key_pem;
  });
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("serving certificate: ", st.message()));
  return st;
}

absl::Status TlsServer::SetClientCaNames(const std::string& bundles_pem) {
  absl::Status st = impl_->Replace([&](TlsMaterial* m) { m->client_ca_pem = bundles_pem; });
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("client CA names: ", st.message()));
  return st;
}

// Every open connection's OnServerShutdown, on its strand (a snapshot: sessions
// opened later see shutting_down themselves).
static void NotifyShutdown(Shared& shared) {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&shared.mu);
    for (auto& [ptr, weak] : shared.sessions) {
      if (std::shared_ptr<Session> s = weak.lock()) sessions.push_back(std::move(s));
    }
  }
  for (auto& s : sessions) {
    net::post(s->executor(), [s] { s->OnServerShutdown(); });
  }
}

void TlsServer::BeginShutdown() {
  Shared& shared = *impl_->shared;
  if (shared.shutting_down.exchange(true)) return;
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->trim_timer.cancel();
  });
  NotifyShutdown(shared);
}

bool TlsServer::Shutdown(std::chrono::milliseconds grace) {
  {
    absl::MutexLock lock(&impl_->shutdown_mu);
    if (impl_->shut_down) return true;
    impl_->shut_down = true;
  }
  BeginShutdown();
  Shared& shared = *impl_->shared;
  absl::Time deadline = absl::Now() + absl::FromChrono(grace);
  bool clean;
  {
    absl::MutexLock lock(&shared.mu);
    auto drained = [&shared]() {
      shared.mu.AssertHeld();  // absl::Condition runs it under the lock
      return shared.active_requests == 0;
    };
    clean = shared.mu.AwaitWithDeadline(absl::Condition(&drained), deadline);
  }
  // Connections that are still open (idle, mid-read) are closed now.
  NotifyShutdown(shared);
  impl_->work.reset();
  {
    // Let graceful TLS closes finish, briefly; then stop whatever remains.
    absl::MutexLock lock(&impl_->threads_mu);
    auto done = [impl = impl_.get()]() {
      impl->threads_mu.AssertHeld();  // absl::Condition runs it under the lock
      return impl->running_threads == 0;
    };
    if (!impl_->threads_mu.AwaitWithTimeout(absl::Condition(&done),
                                            clean ? absl::Seconds(3) : absl::Milliseconds(100))) {
      clean = false;
    }
  }
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  if (impl_->handler_pool) {
    // Handlers still queued are dropped, running ones finish; their answers
    // go to the stopped ioc and are never run.
    impl_->handler_pool->stop();
    impl_->handler_pool->join();
  }
  return clean;
}

}  // namespace poolcoord::apiservice
