#include "apiservice/authenticator.h"

#include <algorithm>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "apiservice/pki.h"
#include "base/string_view.h"
#include "handlers/url.h"
#include "store/api_error.h"

namespace poolcoord::apiservice {
namespace {

// Go's url.PathUnescape; on a malformed escape the key is kept as sent, as
// k8s.io/apiserver's unescapeExtraKey does.
std::string UnescapeExtraKey(const std::string& key) {
  if (!handlers::InvalidPercentEscape(key).empty()) return key;
  return handlers::PercentDecode(key, /*plus_is_space=*/false);
}

// A trust store of every certificate in `pem`; `what` names the source in
// errors. InvalidArgument when it holds no certificate.
absl::StatusOr<X509_STORE*> CaStoreFromPem(const std::string& pem, const std::string& what) {
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++count;
    X509_free(cert);
  }
  BIO_free(bio);
  ERR_clear_error();
  if (count == 0) {
    X509_STORE_free(store);
    return absl::InvalidArgumentError(absl::StrCat(what, ": no PEM certificate in the file"));
  }
  // Any certificate of the bundle is a trust anchor, as Go's x509.CertPool treats
  // it, even an intermediate.
  X509_STORE_set_flags(store, X509_V_FLAG_PARTIAL_CHAIN);
  return store;
}

absl::StatusOr<std::string> ReadCaFile(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> pem = ReadFileToString(path);
  if (!pem.ok()) {
    return absl::Status(pem.status().code(), absl::StrCat(flag, ": ", pem.status().message()));
  }
  // Checked here so that a bad file fails the start, naming the flag.
  absl::StatusOr<X509_STORE*> store = CaStoreFromPem(*pem, absl::StrCat(flag, " ", path));
  if (!store.ok()) return store.status();
  X509_STORE_free(*store);
  return pem;
}

std::vector<std::string> LowerAll(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& h : names) {
    if (!h.empty()) out.push_back(absl::AsciiStrToLower(h));
  }
  return out;
}

// The subject's entries for `nid` as UTF-8, in order.
std::vector<std::string> SubjectEntries(X509* cert, int nid) {
  std::vector<std::string> out;
  X509_NAME* name = X509_get_subject_name(cert);
  for (int i = X509_NAME_get_index_by_NID(name, nid, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(name, nid, i)) {
    ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    unsigned char* utf8 = nullptr;
    int n = ASN1_STRING_to_UTF8(&utf8, data);
    if (n >= 0) {
      out.emplace_back(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
      OPENSSL_free(utf8);
    }
  }
  return out;
}

// Go's pkix.Name keeps the last CN of the subject.
std::string CommonName(X509* cert) {
  std::vector<std::string> cns = SubjectEntries(cert, NID_commonName);
  return cns.empty() ? "" : cns.back();
}

void AddAuthenticatedGroup(base::UserInfo& user) {
  if (!user.InGroup(kAuthenticatedGroup)) user.groups.push_back(kAuthenticatedGroup);
}

// CSV as Go's encoding/csv reads it with TrimLeadingSpace, one record.
std::vector<std::string> ParseCsvRecord(std::string_view line) {
  std::vector<std::string> fields;
  size_t i = 0;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::string field;
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      while (i < line.size() && line[i] != ',') field += line[i++];
    } else {
      while (i < line.size() && line[i] != ',') field += line[i++];
    }
    fields.push_back(std::move(field));
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  return fields;
}

}  // namespace

base::UserInfo AnonymousUser() {
  base::UserInfo user;
  user.username = kAnonymousUser;
  user.groups = {kUnauthenticatedGroup};
  return user;
}

bool IsAnonymous(const base::UserInfo& user) { return user.username == kAnonymousUser; }

bool AnonymousAllowed(std::string_view method, std::string_view path) {
  for (std::string_view health : {"/healthz", "/livez", "/readyz"}) {
    if (path == health) return true;
    if (path.size() > health.size() && path.substr(0, health.size()) == health &&
        path[health.size()] == '/') {
      return true;
    }
  }
  if (path == "/version" || path == "/version/" || path == "/metrics") return true;
  return method == "POST" && path == kWebhookPath;
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(const std::string& content) {
  std::vector<TokenEntry> entries;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(content, '\n')) {
    ++line_number;
    std::string_view line(raw.data(), raw.size());
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(base::Av(line)).empty()) continue;
    std::vector<std::string> fields = ParseCsvRecord(line);
    if (fields.size() < 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file line ", line_number,
          ": must have at least 3 columns (token, user name, user uid), found ", fields.size()));
    }
    TokenEntry entry;
    entry.token = fields[0];
    entry.user.username = fields[1];
    entry.user.uid = fields[2];
    if (entry.token.empty()) continue;  // kube-apiserver skips these with a warning
    if (entry.user.username.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file line ", line_number, ": empty user name"));
    }
    if (fields.size() >= 4 && !fields[3].empty()) {
      for (absl::string_view g : absl::StrSplit(fields[3], ',')) {
        absl::string_view trimmed = absl::StripAsciiWhitespace(g);
        if (!trimmed.empty()) entry.user.groups.emplace_back(trimmed);
      }
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

// One front-proxy configuration: its CA, allowed names and header names.
struct Authenticator::RequestHeaderSource {
  X509_STORE* ca = nullptr;  // owned by the State
  std::vector<std::string> allowed_names;
  std::vector<std::string> username_headers;  // lower-cased
  std::vector<std::string> group_headers;     // lower-cased
  std::vector<std::string> extra_prefixes;    // lower-cased
};

// Everything the certificate authenticators use; immutable once published.
struct Authenticator::State {
  X509_STORE* client_ca = nullptr;  // nullptr: no x509 authentication
  std::vector<RequestHeaderSource> requestheader;  // flags first, then the ConfigMap
  std::string accepted_ca_pem;  // every CA above, PEM
  std::string client_ca_pem;    // the client_ca store's, PEM
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (client_ca != nullptr) X509_STORE_free(client_ca);
    for (RequestHeaderSource& source : requestheader) X509_STORE_free(source.ca);
  }
};

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Create(
    const AuthenticatorOptions& options) {
  std::unique_ptr<Authenticator> a(new Authenticator());
  a->options_ = options;
  std::string client_ca_pem, requestheader_ca_pem;
  if (!options.client_ca_file.empty()) {
    absl::StatusOr<std::string> pem = ReadCaFile(options.client_ca_file, "--client-ca-file");
    if (!pem.ok()) return pem.status();
    client_ca_pem = *std::move(pem);
  }
  if (!options.requestheader_client_ca_file.empty()) {
    absl::StatusOr<std::string> pem =
        ReadCaFile(options.requestheader_client_ca_file, "--requestheader-client-ca-file");
    if (!pem.ok()) return pem.status();
    requestheader_ca_pem = *std::move(pem);
  }
  if (!options.token_auth_file.empty()) {
    absl::StatusOr<std::string> content = ReadFileToString(options.token_auth_file);
    if (!content.ok()) {
      return absl::Status(content.status().code(),
                          absl::StrCat("--token-auth-file: ", content.status().message()));
    }
    absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(*content);
    if (!entries.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--token-auth-file ", options.token_auth_file, ": ", entries.status().message()));
    }
    for (TokenEntry& e : *entries) a->tokens_[e.token] = std::move(e.user);
  }
  if (absl::Status st = a->SetFileCaBundles(client_ca_pem, requestheader_ca_pem); !st.ok()) {
    return st;
  }
  return a;
}

absl::Status Authenticator::ApplyConfigMap(const AuthenticationConfigMap& config) {
  absl::MutexLock update(&update_mu_);
  if (absl::Status st = Rebuild(client_ca_pem_, requestheader_ca_pem_, config); !st.ok()) return st;
  config_ = config;
  if (trust_changed_) trust_changed_();
  return absl::OkStatus();
}

absl::Status Authenticator::SetFileCaBundles(const std::string& client_ca_pem,
                                             const std::string& requestheader_ca_pem) {
  absl::MutexLock update(&update_mu_);
  if (absl::Status st = Rebuild(client_ca_pem, requestheader_ca_pem, config_); !st.ok()) return st;
  client_ca_pem_ = client_ca_pem;
  requestheader_ca_pem_ = requestheader_ca_pem;
  if (trust_changed_) trust_changed_();
  return absl::OkStatus();
}

void Authenticator::SetTrustChangedListener(std::function<void()> listener) {
  absl::MutexLock update(&update_mu_);
  trust_changed_ = std::move(listener);
}

std::string Authenticator::AcceptedCaPem() const { return Snapshot()->accepted_ca_pem; }

std::string Authenticator::ClientCaPem() const { return Snapshot()->client_ca_pem; }

absl::Status Authenticator::Rebuild(const std::string& client_ca_pem,
                                    const std::string& requestheader_ca_pem,
                                    const AuthenticationConfigMap& config) {
  auto state = std::make_shared<State>();
  const std::string where =
      absl::StrCat("configmap ", kAuthenticationConfigMapNamespace, "/", kAuthenticationConfigMapName);
  std::string client_pem = client_ca_pem;
  if (config.exists && !config.client_ca_pem.empty()) {
    absl::StrAppend(&client_pem, "\n", config.client_ca_pem);
  }
  if (!client_pem.empty()) {
    absl::StatusOr<X509_STORE*> store = CaStoreFromPem(client_pem, absl::StrCat(where, " client-ca-file"));
    if (!store.ok()) return store.status();
    state->client_ca = *store;
    state->client_ca_pem = client_pem;
    absl::StrAppend(&state->accepted_ca_pem, client_pem, "\n");
  }
  // The flags' front proxy and the ConfigMap's are trusted alike, each with its
  // own CA and header names (lower-cased, as the transport hands headers over).
  auto add_requestheader = [&](X509_STORE* ca, const auto& from, const std::string& pem) {
    RequestHeaderSource source;
    source.ca = ca;
    source.allowed_names = from.requestheader_allowed_names;
    source.username_headers = LowerAll(from.requestheader_username_headers);
    source.group_headers = LowerAll(from.requestheader_group_headers);
    source.extra_prefixes = LowerAll(from.requestheader_extra_headers_prefix);
    state->requestheader.push_back(std::move(source));
    absl::StrAppend(&state->accepted_ca_pem, pem, "\n");
  };
  if (!requestheader_ca_pem.empty()) {
    absl::StatusOr<X509_STORE*> store =
        CaStoreFromPem(requestheader_ca_pem, "--requestheader-client-ca-file");
    if (!store.ok()) return store.status();
    add_requestheader(*store, options_, requestheader_ca_pem);
  }
  if (config.exists && !config.requestheader_client_ca_pem.empty()) {
    absl::StatusOr<X509_STORE*> store = CaStoreFromPem(
        config.requestheader_client_ca_pem, absl::StrCat(where, " requestheader-client-ca-file"));
    if (!store.ok()) return store.status();
    add_requestheader(*store, config, config.requestheader_client_ca_pem);
  }
  absl::MutexLock lock(&mu_);
  if (state_ != nullptr) retired_.push_back(std::move(state_));
  state_ = std::move(state);
  return absl::OkStatus();
}

std::shared_ptr<const Authenticator::State> Authenticator::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

Authenticator::~Authenticator() = default;

bool Authenticator::Verify(X509_STORE* store, const PeerCertificates& peer) const {
  bool verified = false;
  if (peer.CachedVerification(store, &verified)) return verified;
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  if (ctx == nullptr) return false;
  if (X509_STORE_CTX_init(ctx, store, peer.leaf(), peer.intermediates()) == 1) {
    // Purpose sslclient: extendedKeyUsage must allow clientAuth when present, as
    // Go's x509.VerifyOptions{KeyUsages: [ClientAuth]}.
    X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
    verified = X509_verify_cert(ctx) == 1;
  }
  X509_STORE_CTX_free(ctx);
  ERR_clear_error();
  peer.CacheVerification(store, verified);
  return verified;
}

absl::StatusOr<base::UserInfo> Authenticator::Authenticate(
    const handlers::HeaderList& headers, const PeerCertificates* peer) const {
  const std::shared_ptr<const State> state = Snapshot();
  bool failed = false;

  if (peer != nullptr) {
    for (const RequestHeaderSource& source : state->requestheader) {
      if (!Verify(source.ca, *peer)) {
        failed = true;
        continue;
      }
      const auto& allowed = source.allowed_names;
      std::string cn = CommonName(peer->leaf());
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), cn) == allowed.end()) {
        failed = true;
        continue;
      }
      base::UserInfo user;
      for (const std::string& name : source.username_headers) {
        for (const auto& [key, value] : headers) {
          if (key == name) {
            user.username = value;  // the first line of this header, as Header.Get
            break;
          }
        }
        if (!user.username.empty()) break;
      }
      if (user.username.empty()) continue;
      for (const std::string& name : source.group_headers) {
        for (const auto& [key, value] : headers) {
          if (key == name) user.groups.push_back(value);
        }
      }
      for (const auto& [key, value] : headers) {
        for (const std::string& prefix : source.extra_prefixes) {
          if (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0) {
            user.extra[UnescapeExtraKey(key.substr(prefix.size()))].push_back(value);
            break;
          }
        }
      }
      AddAuthenticatedGroup(user);
      return user;
    }
  }

  if (state->client_ca != nullptr && peer != nullptr) {
    if (!Verify(state->client_ca, *peer)) {
      failed = true;
    } else {
      base::UserInfo user;
      user.username = CommonName(peer->leaf());
      // A verified certificate without a CN names nobody (k8s.io/apiserver's
      // CommonNameUserConversion); the other authenticators still get their turn.
      if (!user.username.empty()) {
        user.groups = SubjectEntries(peer->leaf(), NID_organizationName);
        AddAuthenticatedGroup(user);
        return user;
      }
    }
  }

  const bool tokens_enabled =
      !tokens_.empty() || !options_.token_auth_file.empty() || options_.token_reviewer != nullptr;
  if (tokens_enabled) {
    for (const auto& [key, value] : headers) {
      if (key != "authorization") continue;
      absl::string_view auth = absl::StripAsciiWhitespace(value);
      std::vector<absl::string_view> parts = absl::StrSplit(auth, absl::MaxSplits(' ', 2));
      if (parts.size() < 2 || absl::AsciiStrToLower(parts[0]) != "bearer" ||
          parts[1].empty()) {
        break;
      }
      const std::string token(parts[1]);
      if (auto it = tokens_.find(token); it != tokens_.end()) {
        base::UserInfo user = it->second;
        AddAuthenticatedGroup(user);
        return user;
      }
      if (options_.token_reviewer == nullptr) {
        failed = true;
        break;
      }
      absl::StatusOr<TokenReviewResult> review = options_.token_reviewer->Review(token);
      if (!review.ok()) {
        base::LogWarning("token review failed: ", review.status().message());
        failed = true;
        break;
      }
      if (!review->authenticated) {
        failed = true;
        break;
      }
      base::UserInfo user = review->user;
      AddAuthenticatedGroup(user);
      return user;
    }
  }

  if (failed) return store::UnauthorizedError();
  return AnonymousUser();
}

}  // namespace poolcoord::apiservice
