#include "apiservice/pki.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "apiservice/openssl_ptr.h"

namespace poolcoord::apiservice {
namespace {

struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};

constexpr char kKubeconfigHeader[] =
    "# Written by poolcoord-apiserver: admin credentials for this server. It rewrites this "
    "file when they change.\n";

// `what`, then the first queued OpenSSL error; clears the queue.
std::string OpenSslError(const char* what) { return absl::StrCat(what, ": ", apiservice::OpenSslError()); }

absl::StatusOr<X509Ptr> ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::InvalidArgumentError(OpenSslError("not a PEM certificate"));
  return cert;
}

absl::StatusOr<PkeyPtr> ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return absl::InvalidArgumentError(OpenSslError("not a PEM private key"));
  return key;
}

std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(
      X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (!ext) {
    return absl::InvalidArgumentError(
        OpenSslError(absl::StrCat("bad extension ", OBJ_nid2sn(nid), "=", value).c_str()));
  }
  if (X509_add_ext(cert, ext.get(), -1) != 1) return absl::InternalError(OpenSslError("X509_add_ext"));
  return absl::OkStatus();
}

bool IsWildcard(const std::string& address) {
  return address.empty() || address == "0.0.0.0" || address == "::" || address == "[::]";
}

absl::Status WriteNewFile(const std::string& path, const std::string& content, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::close(fd) != 0) {
    return absl::InternalError(absl::StrCat("cannot finish ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A certificate/key pair in the certificate directory, created or reused.
struct PairFiles {
  std::string cert;
  std::string key;
};

// Loads an existing pair and checks it, or reports that none exists (nullopt).
absl::StatusOr<std::optional<CertKeyPem>> LoadExistingPair(const PairFiles& files,
                                                           const CertKeyPem* issuer) {
  bool have_cert = Exists(files.cert), have_key = Exists(files.key);
  if (!have_cert && !have_key) return std::optional<CertKeyPem>();
  if (have_cert != have_key) {
    const std::string& present = have_cert ? files.cert : files.key;
    const std::string& missing = have_cert ? files.key : files.cert;
    return absl::FailedPreconditionError(absl::StrCat(
        "found ", present, " but not ", missing,
        "; restore it, or remove ", present, " to generate a new pair"));
  }
  CertKeyPem pair;
  absl::StatusOr<std::string> cert_pem = ReadFileToString(files.cert);
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::string> key_pem = ReadFileToString(files.key);
  if (!key_pem.ok()) return key_pem.status();
  pair.cert_pem = *std::move(cert_pem);
  pair.key_pem = *std::move(key_pem);
  absl::StatusOr<X509Ptr> cert = ParseCert(pair.cert_pem);
  if (!cert.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(files.cert, ": ", cert.status().message(), "; remove it and ", files.key,
                     " to generate a new pair"));
  }
  absl::StatusOr<PkeyPtr> key = ParseKey(pair.key_pem);
  if (!key.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(files.key, ": ", key.status().message(), "; remove it and ", files.cert,
                     " to generate a new pair"));
  }
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return absl::FailedPreconditionError(
        absl::StrCat(files.cert, " does not match the private key ", files.key,
                     "; remove both to generate a new pair"));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert->get())) <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        files.cert, " has expired; remove it and ", files.key, " to generate a new pair"));
  }
  if (issuer != nullptr) {
    absl::StatusOr<X509Ptr> ca = ParseCert(issuer->cert_pem);
    if (!ca.ok()) return ca.status();
    EVP_PKEY* ca_key = X509_get0_pubkey(ca->get());
    if (ca_key == nullptr || X509_verify(cert->get(), ca_key) != 1) {
      ERR_clear_error();
      return absl::FailedPreconditionError(absl::StrCat(
          files.cert, " was not issued by the CA in the same directory; remove it and ",
          files.key, " to generate a new pair"));
    }
  }
  return std::optional<CertKeyPem>(std::move(pair));
}

absl::StatusOr<CertKeyPem> EnsurePair(const PairFiles& files, const CertSpec& spec,
                                      const CertKeyPem* issuer, PkiResult* result) {
  absl::StatusOr<std::optional<CertKeyPem>> existing = LoadExistingPair(files, issuer);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) return **existing;
  absl::StatusOr<CertKeyPem> made = CreateCertificate(spec, issuer);
  if (!made.ok()) return made.status();
  // The key first: a crash between the two leaves "a key without a certificate",
  // which the next start reports instead of silently pairing.
  if (absl::Status st = WriteNewFile(files.key, made->key_pem, 0600); !st.ok()) return st;
  if (absl::Status st = WriteNewFile(files.cert, made->cert_pem, 0644); !st.ok()) return st;
  result->created.push_back(files.cert);
  result->created.push_back(files.key);
  return made;
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("cannot read ", path));
  return ss.str();
}

absl::StatusOr<CertKeyPem> CreateCertificate(const CertSpec& spec, const CertKeyPem* issuer) {
  ERR_clear_error();
  X509Ptr issuer_cert;
  PkeyPtr issuer_key;
  if (issuer != nullptr) {
    absl::StatusOr<X509Ptr> c = ParseCert(issuer->cert_pem);
    if (!c.ok()) return c.status();
    absl::StatusOr<PkeyPtr> k = ParseKey(issuer->key_pem);
    if (!k.ok()) return k.status();
    issuer_cert = *std::move(c);
    issuer_key = *std::move(k);
  }
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return absl::InternalError(OpenSslError("EC key generation"));

  X509Ptr cert(X509_new());
  if (!cert) return absl::InternalError(OpenSslError("X509_new"));
  X509_set_version(cert.get(), 2);
  std::unique_ptr<BIGNUM, BnFree> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return absl::InternalError(OpenSslError("serial number"));
  }
  // One hour of slack before "now" tolerates small clock differences, as kubeadm does.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600 + spec.validity_offset_seconds);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()),
                  static_cast<long>(spec.valid_days) * 86400 + spec.validity_offset_seconds);
  X509_set_pubkey(cert.get(), key.get());

  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const std::string& org : spec.organizations) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1, 0);
  }
  if (!spec.common_name.empty()) {
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(spec.common_name.c_str()),
                               -1, -1, 0);
  }
  X509_set_issuer_name(cert.get(),
                       issuer_cert ? X509_get_subject_name(issuer_cert.get()) : name);

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer_cert ? issuer_cert.get() : cert.get(), cert.get(), nullptr,
                 nullptr, 0);
  absl::Status st = AddExtension(cert.get(), &ctx, NID_basic_constraints,
                                 spec.is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  if (st.ok()) {
    st = AddExtension(cert.get(), &ctx, NID_key_usage,
                      spec.is_ca ? "critical,keyCertSign,cRLSign,digitalSignature"
                                 : "critical,digitalSignature");
  }
  if (st.ok()) st = AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash");
  if (st.ok() && issuer_cert) {
    st = AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always");
  }
  std::vector<std::string> eku;
  if (spec.server_auth) eku.push_back("serverAuth");
  if (spec.client_auth) eku.push_back("clientAuth");
  if (st.ok() && !eku.empty()) {
    st = AddExtension(cert.get(), &ctx, NID_ext_key_usage, absl::StrJoin(eku, ","));
  }
  std::vector<std::string> sans;
  for (const std::string& dns : spec.dns_names) sans.push_back("DNS:" + dns);
  for (const std::string& ip : spec.ip_addresses) sans.push_back("IP:" + ip);
  if (st.ok() && !sans.empty()) {
    st = AddExtension(cert.get(), &ctx, NID_subject_alt_name, absl::StrJoin(sans, ","));
  }
  if (!st.ok()) return st;

  if (X509_sign(cert.get(), issuer_key ? issuer_key.get() : key.get(), EVP_sha256()) == 0) {
    return absl::InternalError(OpenSslError("X509_sign"));
  }
  CertKeyPem out;
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr,
                               nullptr) != 1) {
    return absl::InternalError(OpenSslError("PEM encoding"));
  }
  out.cert_pem = BioToString(cert_bio.get());
  out.key_pem = BioToString(key_bio.get());
  return out;
}

absl::StatusOr<PkiResult> EnsureCertificates(const PkiOptions& options) {
  PkiResult result;
  if (!options.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert_pem = ReadFileToString(options.tls_cert_file);
    if (!cert_pem.ok()) return cert_pem.status();
    absl::StatusOr<std::string> key_pem = ReadFileToString(options.tls_private_key_file);
    if (!key_pem.ok()) return key_pem.status();
    absl::StatusOr<X509Ptr> cert = ParseCert(*cert_pem);
    if (!cert.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--tls-cert-file ", options.tls_cert_file, ": ", cert.status().message()));
    }
    absl::StatusOr<PkeyPtr> key = ParseKey(*key_pem);
    if (!key.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--tls-private-key-file ", options.tls_private_key_file, ": ", key.status().message()));
    }
    if (X509_check_private_key(cert->get(), key->get()) != 1) {
      ERR_clear_error();
      return absl::FailedPreconditionError(
          absl::StrCat("--tls-cert-file ", options.tls_cert_file,
                       " does not match --tls-private-key-file ", options.tls_private_key_file));
    }
    result.serving_cert_file = options.tls_cert_file;
    result.serving_key_file = options.tls_private_key_file;
    result.client_ca_file = options.client_ca_file;
    return result;
  }

  std::error_code ec;
  std::filesystem::create_directories(options.cert_dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create --cert-dir ", options.cert_dir, ": ", ec.message()));
  }
  auto in_dir = [&](const char* file) {
    return (std::filesystem::path(options.cert_dir) / file).string();
  };

  CertSpec ca_spec;
  ca_spec.common_name = "poolcoord-ca";
  ca_spec.is_ca = true;
  ca_spec.valid_days = 3650;
  absl::StatusOr<CertKeyPem> ca =
      EnsurePair({in_dir("ca.crt"), in_dir("ca.key")}, ca_spec, nullptr, &result);
  if (!ca.ok()) return ca.status();

  CertSpec serving;
  serving.common_name = "poolcoord-apiserver";
  serving.server_auth = true;
  serving.dns_names = {"localhost"};
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' &&
      std::string(host) != "localhost") {
    serving.dns_names.push_back(host);
  }
  serving.ip_addresses = {"127.0.0.1", "::1"};
  if (!IsWildcard(options.bind_address) && options.bind_address != "127.0.0.1" &&
      options.bind_address != "::1") {
    serving.ip_addresses.push_back(options.bind_address);
  }
  absl::StatusOr<CertKeyPem> server =
      EnsurePair({in_dir("apiserver.crt"), in_dir("apiserver.key")}, serving, &*ca, &result);
  if (!server.ok()) return server.status();

  CertSpec admin;
  admin.common_name = "poolcoord-admin";
  admin.organizations = {"system:masters"};
  admin.client_auth = true;
  absl::StatusOr<CertKeyPem> admin_pair =
      EnsurePair({in_dir("admin.crt"), in_dir("admin.key")}, admin, &*ca, &result);
  if (!admin_pair.ok()) return admin_pair.status();

  result.serving_cert_file = in_dir("apiserver.crt");
  result.serving_key_file = in_dir("apiserver.key");
  result.ca_cert_file = in_dir("ca.crt");
  result.admin_cert_file = in_dir("admin.crt");
  result.admin_key_file = in_dir("admin.key");
  result.client_ca_file = options.client_ca_file.empty() ? in_dir("ca.crt") : options.client_ca_file;
  return result;
}

std::string ServerUrl(const std::string& bind_address, int port) {
  std::string host = IsWildcard(bind_address) ? "127.0.0.1" : bind_address;
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  return absl::StrCat("https://", host, ":", port);
}

absl::Status WriteAdminKubeconfig(const std::string& path, const PkiResult& pki,
                                  const std::string& server_url, bool* changed) {
  *changed = false;
  if (pki.ca_cert_file.empty() || pki.admin_cert_file.empty()) {
    return absl::FailedPreconditionError("no generated admin certificate to write a kubeconfig for");
  }
  absl::StatusOr<std::string> ca = ReadFileToString(pki.ca_cert_file);
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> crt = ReadFileToString(pki.admin_cert_file);
  if (!crt.ok()) return crt.status();
  absl::StatusOr<std::string> key = ReadFileToString(pki.admin_key_file);
  if (!key.ok()) return key.status();
  std::string content = absl::StrCat(
      kKubeconfigHeader,
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: poolcoord\n"
      "  cluster:\n"
      "    server: ", server_url, "\n",
      "    certificate-authority-data: ", absl::Base64Escape(*ca), "\n",
      "users:\n"
      "- name: poolcoord-admin\n"
      "  user:\n"
      "    client-certificate-data: ", absl::Base64Escape(*crt), "\n",
      "    client-key-data: ", absl::Base64Escape(*key), "\n",
      "contexts:\n"
      "- name: poolcoord\n"
      "  context:\n"
      "    cluster: poolcoord\n"
      "    user: poolcoord-admin\n"
      "current-context: poolcoord\n");
  if (Exists(path)) {
    absl::StatusOr<std::string> old = ReadFileToString(path);
    if (!old.ok()) return old.status();
    if (*old == content) return absl::OkStatus();
    if (old->rfind(kKubeconfigHeader, 0) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " exists and was not written by poolcoord-apiserver (or `kubectl config` "
          "rewrote it, which drops the first line)"));
    }
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", parent.string(), ": ", ec.message()));
  }
  // Write beside and rename, so a reader never sees half a file.
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  ::unlink(tmp.c_str());
  if (absl::Status st = WriteNewFile(tmp, content, 0600); !st.ok()) return st;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  }
  *changed = true;
  return absl::OkStatus();
}

}  // namespace poolcoord::apiservice
