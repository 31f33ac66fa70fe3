#include "apiservice/dynamic_certificates.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/log.h"
#include "base/quote.h"
#include "apiservice/openssl_ptr.h"
#include "apiservice/pki.h"

namespace poolcoord::apiservice {
namespace {

std::string OpenSslReason() {
  unsigned long code = ERR_peek_last_error();
  std::string out = "unknown error";
  if (code != 0) {
    const char* reason = ERR_reason_error_string(code);
    out = reason != nullptr ? reason : absl::StrCat("error ", code);
  }
  ERR_clear_error();
  return out;
}

size_t CountOccurrences(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string_view::npos;
       pos = text.find(what, pos + what.size())) {
    ++n;
  }
  return n;
}

// Every certificate block of `pem`, strictly: a block that does not parse (a
// file cut short while being written) is an error, not the end of the list.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const std::string& pem) {
  const size_t blocks = CountOccurrences(pem, "-----BEGIN CERTIFICATE-----");
  std::vector<X509Ptr> certs;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();
  if (blocks == 0 || certs.empty()) {
    return absl::InvalidArgumentError(pem.empty() ? "the file is empty"
                                                  : "no PEM certificate in the file");
  }
  if (certs.size() != blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate ", certs.size() + 1, " of ", blocks,
                     " does not parse (a file still being written?)"));
  }
  return certs;
}

std::string NameEntry(X509_NAME* name, int nid) {
  int i = X509_NAME_get_index_by_NID(name, nid, -1);
  if (i < 0) return "";
  // Go's pkix.Name keeps the last entry; so do we.
  for (int next = i; next >= 0; next = X509_NAME_get_index_by_NID(name, nid, next)) i = next;
  unsigned char* utf8 = nullptr;
  int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)));
  if (n < 0) return "";
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

std::string SubjectLabel(X509* cert) {
  std::string cn = NameEntry(X509_get_subject_name(cert), NID_commonName);
  if (!cn.empty()) return cn;
  char buf[256];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  return buf;
}

int64_t UnixTime(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

std::vector<std::string> SubjectAltNames(X509* cert) {
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    if (gn->type == GEN_DNS) {
      const ASN1_STRING* s = gn->d.dNSName;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gn->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = gn->d.iPAddress;
      char buf[INET6_ADDRSTRLEN] = "";
      int len = ASN1_STRING_length(ip);
      const unsigned char* data = ASN1_STRING_get0_data(ip);
      if (len == 4) inet_ntop(AF_INET, data, buf, sizeof(buf));
      if (len == 16) inet_ntop(AF_INET6, data, buf, sizeof(buf));
      if (buf[0] != '\0') out.emplace_back(buf);
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string Serial(X509* cert) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  if (bn == nullptr) return "";
  char* hex = BN_bn2hex(bn);
  std::string out = hex != nullptr ? hex : "";
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

std::string FormatUnix(int64_t t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(t), absl::UTCTimeZone());
}

// One line as kube's event broadcaster writes an Event to klog.
void LogEvent(bool normal, std::string_view object, std::string_view reason,
              std::string_view message) {
  base::LogLine(normal ? 'I' : 'W',
          absl::StrCat("\"Event occurred\" object=", base::GoQuote(object), " kind=\"Certificate\" type=",
                       normal ? "\"Normal\"" : "\"Warning\"", " reason=", base::GoQuote(reason),
                       " message=", base::GoQuote(message)));
}

std::string ContentKey(const absl::StatusOr<std::string>& a,
                       const absl::StatusOr<std::string>* b = nullptr) {
  // A read error is content of its own, so that a missing file is logged once.
  if (!a.ok()) return absl::StrCat("\x01", a.status().ToString());
  if (b != nullptr && !b->ok()) return absl::StrCat("\x01", b->status().ToString());
  if (b == nullptr) return *a;
  return absl::StrCat(a->size(), ":", *a, **b);
}

}  // namespace

const char* CertificateMaterialName(CertificateMaterial material) {
  switch (material) {
    case CertificateMaterial::kServing: return "serving-cert";
    case CertificateMaterial::kClientCa: return "client-ca";
    case CertificateMaterial::kRequestHeaderCa: return "requestheader-client-ca";
  }
  return "";
}

std::string ServingCertificate::Describe() const {
  return absl::StrCat(base::GoQuote(subject_cn), " [serving] validServingFor=[", absl::StrJoin(names, ","),
                      "] issuer=", base::GoQuote(issuer_cn), " serial=", serial, " (",
                      FormatUnix(not_before_unix), " to ", FormatUnix(not_after_unix), ")");
}

absl::StatusOr<ServingCertificate> ParseServingCertificate(const std::string& cert_pem,
                                                           const std::string& key_pem) {
  absl::StatusOr<std::vector<X509Ptr>> chain = ParseCertificates(cert_pem);
  if (!chain.ok()) return absl::InvalidArgumentError(absl::StrCat("certificate: ", chain.status().message()));
  if (key_pem.empty()) return absl::InvalidArgumentError("private key: the file is empty");
  BioPtr bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat("private key: no PEM private key that parses (", OpenSslReason(), ")"));
  }
  X509* leaf = (*chain)[0].get();
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "the private key does not match the certificate (is one of the two files not yet "
        "replaced?)");
  }
  ServingCertificate out;
  out.cert_pem = cert_pem;
  out.key_pem = key_pem;
  out.serial = Serial(leaf);
  out.subject_cn = SubjectLabel(leaf);
  out.issuer_cn = NameEntry(X509_get_issuer_name(leaf), NID_commonName);
  out.names = SubjectAltNames(leaf);
  out.not_before_unix = UnixTime(X509_get0_notBefore(leaf));
  out.not_after_unix = UnixTime(X509_get0_notAfter(leaf));
  return out;
}

absl::StatusOr<std::vector<std::string>> ParseCaBundle(const std::string& pem) {
  absl::StatusOr<std::vector<X509Ptr>> certs = ParseCertificates(pem);
  if (!certs.ok()) return certs.status();
  std::vector<std::string> subjects;
  for (const X509Ptr& c : *certs) subjects.push_back(SubjectLabel(c.get()));
  return subjects;
}

DynamicCertificates::DynamicCertificates(DynamicCertificatesOptions options)
    : options_(std::move(options)) {
  base::MetricsRegistry* registry = options_.registry;
  if (registry == nullptr) {
    own_registry_ = std::make_unique<base::MetricsRegistry>();
    registry = own_registry_.get();
  }
  base::CounterFamily& reloads = registry->AddCounter(
      "poolcoord_certificate_reloads_total",
      "Certificate material re-read from its files after start, by material and result "
      "(failure: the file was refused and the previous material kept).",
      {"material", "result"});
  for (int m = 0; m < kCertificateMaterials; ++m) {
    const char* name = CertificateMaterialName(static_cast<CertificateMaterial>(m));
    reloads_[m][0] = &reloads.WithLabels({name, "failure"});
    reloads_[m][1] = &reloads.WithLabels({name, "success"});
  }
  expiration_ = &registry
                     ->AddGauge("poolcoord_serving_certificate_expiration_timestamp_seconds",
                                "notAfter of the serving certificate new handshakes get, in Unix "
                                "seconds.")
                     .WithLabels({});
}

absl::StatusOr<std::unique_ptr<DynamicCertificates>> DynamicCertificates::Create(
    DynamicCertificatesOptions options) {
  if (options.serving_cert_file.empty() != options.serving_key_file.empty()) {
    return absl::InvalidArgumentError("a serving certificate needs both its files");
  }
  std::unique_ptr<DynamicCertificates> d(new DynamicCertificates(std::move(options)));
  if (absl::Status st = d->LoadInitial(); !st.ok()) return st;
  return d;
}

absl::Status DynamicCertificates::LoadInitial() {
  absl::MutexLock check(&check_mu_);
  const DynamicCertificatesOptions& o = options_;
  if (!o.serving_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFileToString(o.serving_cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFileToString(o.serving_key_file);
    if (!key.ok()) return key.status();
    absl::StatusOr<ServingCertificate> serving = ParseServingCertificate(*cert, *key);
    if (!serving.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("serving certificate ", o.serving_cert_file,
                                                     " / ", o.serving_key_file, ": ",
                                                     serving.status().message()));
    }
    tracked_[0].applied = ContentKey(cert, &key);
    expiration_->Set(serving->not_after_unix);
    absl::MutexLock lock(&mu_);
    serving_ = std::make_shared<const ServingCertificate>(*std::move(serving));
  }
  const std::pair<CertificateMaterial, const std::string*> cas[] = {
      {CertificateMaterial::kClientCa, &o.client_ca_file},
      {CertificateMaterial::kRequestHeaderCa, &o.requestheader_client_ca_file}};
  for (const auto& [material, file] : cas) {
    if (file->empty()) continue;
    absl::StatusOr<std::string> pem = ReadFileToString(*file);
    if (!pem.ok()) return pem.status();
    if (absl::StatusOr<std::vector<std::string>> ok = ParseCaBundle(*pem); !ok.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(CertificateMaterialName(material), " bundle ",
                                                     *file, ": ", ok.status().message()));
    }
    tracked_[static_cast<int>(material)].applied = *pem;
    absl::MutexLock lock(&mu_);
    ca_pem_[static_cast<int>(material)] = *std::move(pem);
  }
  return absl::OkStatus();
}

DynamicCertificates::~DynamicCertificates() { Stop(); }

std::shared_ptr<const ServingCertificate> DynamicCertificates::serving() const {
  absl::MutexLock lock(&mu_);
  return serving_;
}

std::string DynamicCertificates::ca_pem(CertificateMaterial material) const {
  absl::MutexLock lock(&mu_);
  return ca_pem_[static_cast<int>(material)];
}

void DynamicCertificates::AddListener(Listener listener) {
  listeners_.push_back(std::move(listener));
}

uint64_t DynamicCertificates::Reloads(CertificateMaterial material, bool success) const {
  return reloads_[static_cast<int>(material)][success ? 1 : 0]->Value();
}

absl::Status DynamicCertificates::Notify(CertificateMaterial material) {
  for (const Listener& listener : listeners_) {
    if (absl::Status st = listener(material); !st.ok()) return st;
  }
  return absl::OkStatus();
}

void DynamicCertificates::CheckNow() {
  absl::MutexLock check(&check_mu_);
  if (!options_.serving_cert_file.empty()) CheckServing();
  if (!options_.client_ca_file.empty()) {
    CheckCa(CertificateMaterial::kClientCa, options_.client_ca_file);
  }
  if (!options_.requestheader_client_ca_file.empty()) {
    CheckCa(CertificateMaterial::kRequestHeaderCa, options_.requestheader_client_ca_file);
  }
}

void DynamicCertificates::CheckServing() {
  constexpr int kIndex = static_cast<int>(CertificateMaterial::kServing);
  Tracked& tracked = tracked_[kIndex];
  absl::StatusOr<std::string> cert = ReadFileToString(options_.serving_cert_file);
  absl::StatusOr<std::string> key = ReadFileToString(options_.serving_key_file);
  const std::string content = ContentKey(cert, &key);
  if (content == tracked.applied) {
    tracked.failed.clear();
    return;
  }
  if (content == tracked.failed) return;

  const std::string object = absl::StrCat("serving-cert::", options_.serving_cert_file, "::",
                                          options_.serving_key_file);
  std::shared_ptr<const ServingCertificate> old = serving();
  absl::Status status;
  std::shared_ptr<const ServingCertificate> next;
  if (!cert.ok()) {
    status = cert.status();
  } else if (!key.ok()) {
    status = key.status();
  } else if (absl::StatusOr<ServingCertificate> parsed = ParseServingCertificate(*cert, *key);
             !parsed.ok()) {
    status = parsed.status();
  } else {
    next = std::make_shared<const ServingCertificate>(*std::move(parsed));
    {
      absl::MutexLock lock(&mu_);
      serving_ = next;
    }
    status = Notify(CertificateMaterial::kServing);
    if (!status.ok()) {
      absl::MutexLock lock(&mu_);
      serving_ = old;
    }
  }
  if (!status.ok()) {
    tracked.failed = content;
    reloads_[kIndex][0]->Inc();
    LogEvent(false, object, "ServingCertificateReloadFailed",
             absl::StrCat("not loaded, still serving serial ", old ? old->serial : "(none)", ": ",
                          status.message()));
    return;
  }
  tracked.applied = content;
  tracked.failed.clear();
  reloads_[kIndex][1]->Inc();
  expiration_->Set(next->not_after_unix);
  LogEvent(true, object, "ServingCertificateReload",
           absl::StrCat("loaded serving cert ", next->Describe(), " replacing serial ",
                        old ? old->serial : "(none)"));
  if (next->not_after_unix <= absl::ToUnixSeconds(absl::Now())) {
    base::LogWarning("the serving certificate ", options_.serving_cert_file, " expired at ",
               FormatUnix(next->not_after_unix), "; clients will refuse it");
  }
}

void DynamicCertificates::CheckCa(CertificateMaterial material, const std::string& file) {
  const int index = static_cast<int>(material);
  Tracked& tracked = tracked_[index];
  absl::StatusOr<std::string> pem = ReadFileToString(file);
  const std::string content = ContentKey(pem);
  if (content == tracked.applied) {
    tracked.failed.clear();
    return;
  }
  if (content == tracked.failed) return;

  const std::string object = absl::StrCat(CertificateMaterialName(material), "::", file);
  std::string old = ca_pem(material);
  absl::Status status;
  std::vector<std::string> subjects;
  if (!pem.ok()) {
    status = pem.status();
  } else if (absl::StatusOr<std::vector<std::string>> parsed = ParseCaBundle(*pem); !parsed.ok()) {
    status = parsed.status();
  } else {
    subjects = *std::move(parsed);
    {
      absl::MutexLock lock(&mu_);
      ca_pem_[index] = *pem;
    }
    status = Notify(material);
    if (!status.ok()) {
      absl::MutexLock lock(&mu_);
      ca_pem_[index] = old;
    }
  }
  if (!status.ok()) {
    tracked.failed = content;
    reloads_[index][0]->Inc();
    LogEvent(false, object, "CACertificateReloadFailed",
             absl::StrCat("not loaded, still trusting the previous bundle: ", status.message()));
    return;
  }
  tracked.applied = content;
  tracked.failed.clear();
  reloads_[index][1]->Inc();
  std::vector<std::string> quoted;
  for (const std::string& s : subjects) quoted.push_back(base::GoQuote(s));
  LogEvent(true, object, "CACertificateReload",
           absl::StrCat("loaded ", CertificateMaterialName(material), " bundle of ",
                        subjects.size(), subjects.size() == 1 ? " certificate: " : " certificates: ",
                        absl::StrJoin(quoted, ", ")));
}

// --- the watching thread

std::vector<std::string> DynamicCertificates::WatchedFiles() const {
  std::vector<std::string> files;
  for (const std::string* f : {&options_.serving_cert_file, &options_.serving_key_file,
                               &options_.client_ca_file, &options_.requestheader_client_ca_file}) {
    if (!f->empty()) files.push_back(*f);
  }
  return files;
}

void DynamicCertificates::UpdateWatches() {
  if (inotify_fd_ < 0) return;
  // The directory as named and the one the symlinks lead to (a Secret volume's
  // ..data swap is a rename in the first), and the file itself (an in-place
  // write where the directory is elsewhere).
  constexpr uint32_t kMask = IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE |
                             IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  auto add = [&paths](std::string p) {
    if (p.empty()) p = ".";
    for (const std::string& q : paths) {
      if (q == p) return;
    }
    paths.push_back(std::move(p));
  };
  for (const std::string& file : WatchedFiles()) {
    add(fs::path(file).parent_path().string());
    std::error_code ec;
    fs::path real = fs::canonical(file, ec);
    if (!ec) {
      add(real.parent_path().string());
      add(real.string());
    }
  }
  std::vector<Watch> next;
  for (const std::string& p : paths) {
    int wd = inotify_add_watch(inotify_fd_, p.c_str(), kMask);
    if (wd >= 0) next.push_back({p, wd});
  }
  for (const Watch& old : watches_) {
    bool kept = false;
    for (const Watch& w : next) kept = kept || w.wd == old.wd;
    if (!kept) inotify_rm_watch(inotify_fd_, old.wd);  // EINVAL when already gone: fine
  }
  watches_ = std::move(next);
}

void DynamicCertificates::Start() {
  if (thread_.joinable() || WatchedFiles().empty()) return;
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (options_.use_inotify) {
    inotify_fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (inotify_fd_ < 0) {
      base::LogWarning("certificate files: inotify unavailable (", std::strerror(errno),
                 "); re-reading them every ",
                 std::chrono::duration_cast<std::chrono::seconds>(options_.resync_period).count(),
                 "s");
    }
  }
  UpdateWatches();
  thread_ = std::thread([this] { Run(); });
}

void DynamicCertificates::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  if (inotify_fd_ >= 0) close(inotify_fd_);
  close(wake_fd_);
  inotify_fd_ = wake_fd_ = -1;
}

void DynamicCertificates::Run() {
  using Clock = std::chrono::steady_clock;
  auto next_resync = Clock::now() + options_.resync_period;
  bool pending = false;  // a check is owed to file events, at pending_at
  Clock::time_point pending_at;
  // Files replaced between Create and here.
  CheckNow();
  while (!stopping_.load()) {
    Clock::time_point until = next_resync;
    if (pending && pending_at < until) until = pending_at;
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    int timeout_ms = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, 3'600'000));
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
    poll(fds, 2, timeout_ms);
    if (stopping_.load()) break;
    if (inotify_fd_ >= 0 && (fds[1].revents & POLLIN) != 0) {
      alignas(inotify_event) char buf[4096];
      bool any = false;
      while (read(inotify_fd_, buf, sizeof(buf)) > 0) any = true;
      // Coalesced, not postponed: a steady stream of writes still gets a check
      // every settle_delay.
      if (any && !pending) {
        pending = true;
        pending_at = Clock::now() + options_.settle_delay;
      }
    }
    const Clock::time_point now = Clock::now();
    if ((pending && now >= pending_at) || now >= next_resync) {
      pending = false;
      CheckNow();
      UpdateWatches();
      if (now >= next_resync) next_resync = now + options_.resync_period;
    }
  }
}

}  // namespace poolcoord::apiservice
