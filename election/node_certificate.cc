#include "election/node_certificate.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace poolcoord::election {
namespace {

constexpr int kPssSaltBytes = 32;  // = SHA-256's digest length
constexpr int kMinRsaBits = 2048;
constexpr int kMaxRsaBits = 4096;

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The digest every signature uses, fetched once (an implicit fetch per
// operation costs a provider lookup).
const EVP_MD* Sha256() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

CertificateError CheckKey(EVP_PKEY* key, KeyType* type, std::string* detail) {
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_EC: {
      char group[64] = {0};
      size_t len = 0;
      if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                         &len) != 1 ||
          std::strcmp(group, "prime256v1") != 0) {
        *detail = absl::StrCat("ECDSA key on curve \"", group, "\"; only P-256 is accepted");
        ERR_clear_error();
        return CertificateError::kUnsupportedKey;
      }
      *type = KeyType::kEcdsaP256;
      return CertificateError::kNone;
    }
    case EVP_PKEY_RSA: {
      const int bits = EVP_PKEY_get_bits(key);
      if (bits < kMinRsaBits || bits > kMaxRsaBits) {
        *detail = absl::StrCat("RSA key of ", bits, " bits; ", kMinRsaBits, " to ", kMaxRsaBits,
                               " are accepted");
        return CertificateError::kUnsupportedKey;
      }
      *type = KeyType::kRsa;
      return CertificateError::kNone;
    }
    default:
      *detail = "key is neither ECDSA P-256 nor RSA";
      return CertificateError::kUnsupportedKey;
  }
}

bool EntryText(X509_NAME* name, int index, std::string* out) {
  X509_NAME_ENTRY* entry = X509_NAME_get_entry(name, index);
  if (entry == nullptr) return false;
  unsigned char* utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(entry));
  if (len < 0) return false;
  out->assign(reinterpret_cast<char*>(utf8), static_cast<size_t>(len));
  OPENSSL_free(utf8);
  return true;
}

// CN "system:node:<node>" (exactly one CN) and one O "system:nodes", as the
// x509 authenticator maps them to user and groups.
CertificateError CheckSubject(X509* cert, std::string* node, std::string* detail) {
  X509_NAME* subject = X509_get_subject_name(cert);
  const int cn_index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  std::string cn;
  if (cn_index < 0 || !EntryText(subject, cn_index, &cn)) {
    *detail = "certificate has no common name";
    return CertificateError::kWrongIdentity;
  }
  if (X509_NAME_get_index_by_NID(subject, NID_commonName, cn_index) >= 0) {
    *detail = "certificate has more than one common name";
    return CertificateError::kWrongIdentity;
  }
  const size_t prefix = std::strlen(kNodeUserPrefix);
  if (cn.compare(0, prefix, kNodeUserPrefix) != 0 || !ValidNodeName(cn.substr(prefix))) {
    *detail = absl::StrCat("certificate names \"", cn, "\", not ", kNodeUserPrefix, "<node>");
    return CertificateError::kWrongIdentity;
  }
  bool in_nodes = false;
  for (int i = X509_NAME_get_index_by_NID(subject, NID_organizationName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_organizationName, i)) {
    std::string o;
    if (EntryText(subject, i, &o) && o == kNodesGroup) in_nodes = true;
  }
  if (!in_nodes) {
    *detail = absl::StrCat("certificate of ", cn, " is not in group ", kNodesGroup);
    return CertificateError::kWrongIdentity;
  }
  *node = cn.substr(prefix);
  return CertificateError::kNone;
}

bool HasOrganization(X509* cert, std::string_view organization) {
  X509_NAME* subject = X509_get_subject_name(cert);
  for (int i = X509_NAME_get_index_by_NID(subject, NID_organizationName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_organizationName, i)) {
    std::string o;
    if (EntryText(subject, i, &o) && o == organization) return true;
  }
  return false;
}

// The model's signature (see the header): SHA-256 over a label, the signer's
// certificate fingerprint and the data.
std::string ModelledSignature(const Fingerprint& fingerprint, absl::string_view data) {
  static constexpr char kLabel[] = "poolcoord modelled signature";
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char digest[32];
  unsigned int len = 0;
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, Sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, kLabel, sizeof(kLabel)) == 1 &&
                  EVP_DigestUpdate(ctx, fingerprint.data(), fingerprint.size()) == 1 &&
                  EVP_DigestUpdate(ctx, data.data(), data.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, digest, &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return "";
  return std::string(reinterpret_cast<char*>(digest), len);
}

bool TimeMicros(const ASN1_TIME* t, int64_t* us) {
  struct tm tm;
  std::memset(&tm, 0, sizeof(tm));
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return false;
  *us = static_cast<int64_t>(timegm(&tm)) * 1'000'000;
  return true;
}

std::string Der(X509* cert) {
  unsigned char* buf = nullptr;
  int len = i2d_X509(cert, &buf);
  if (len <= 0) return "";
  std::string out(reinterpret_cast<char*>(buf), static_cast<size_t>(len));
  OPENSSL_free(buf);
  return out;
}

// Sets RSA-PSS on an RSA operation context; no-op for ECDSA.
bool SetPadding(EVP_PKEY_CTX* pctx, KeyType type) {
  if (type != KeyType::kRsa) return true;
  return EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
         EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, kPssSaltBytes) == 1;
}

}  // namespace

const char* CertificateErrorName(CertificateError error) {
  switch (error) {
    case CertificateError::kNone: return "none";
    case CertificateError::kMalformed: return "malformed_certificate";
    case CertificateError::kUnknownAuthority: return "unknown_authority";
    case CertificateError::kExpired: return "expired_certificate";
    case CertificateError::kWrongIdentity: return "wrong_identity";
    case CertificateError::kUnsupportedKey: return "unsupported_key";
  }
  return "unknown";
}

Fingerprint CertificateFingerprint(absl::string_view der) {
  Fingerprint fp{};
  unsigned int len = 0;
  EVP_Digest(der.data(), der.size(), fp.data(), &len, Sha256(), nullptr);
  return fp;
}

// ---------------------------------------------------------------- CertificateAuthority

absl::StatusOr<std::shared_ptr<const CertificateAuthority>> CertificateAuthority::FromPem(
    absl::string_view pem, CertificateAuthorityOptions options) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509_STORE* store = X509_STORE_new();
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
    ++count;
  }
  ERR_clear_error();  // the end of the input reads as an error
  BIO_free(bio);
  if (count == 0) {
    X509_STORE_free(store);
    return absl::InvalidArgumentError("the CA bundle holds no PEM certificate");
  }
  return std::shared_ptr<const CertificateAuthority>(new CertificateAuthority(store, options));
}

absl::StatusOr<std::shared_ptr<const CertificateAuthority>> CertificateAuthority::FromFile(
    const std::string& path) {
  auto pem = ReadFile(path);
  if (!pem.ok()) return pem.status();
  auto ca = FromPem(*pem);
  if (!ca.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", ca.status().message()));
  return ca;
}

CertificateAuthority::~CertificateAuthority() { X509_STORE_free(store_); }

// ---------------------------------------------------------------- NodeCertificate

NodeCertificate::Result NodeCertificate::Verify(absl::string_view der, const CertificateAuthority& ca,
                                                int64_t wall_us) {
  Result result;
  auto refuse = [&](CertificateError error, std::string detail) {
    result.error = error;
    result.detail = std::move(detail);
    return result;
  };
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der.data());
  X509* cert = d2i_X509(nullptr, &p, static_cast<long>(der.size()));
  if (cert == nullptr) {
    ERR_clear_error();
    return refuse(CertificateError::kMalformed, "not a DER certificate");
  }
  struct Free {
    X509* c;
    ~Free() { X509_free(c); }
  } free_cert{cert};
  if (p != reinterpret_cast<const unsigned char*>(der.data()) + der.size()) {
    return refuse(CertificateError::kMalformed, "trailing bytes after the certificate");
  }

  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  if (ctx == nullptr || X509_STORE_CTX_init(ctx, ca.store(), cert, nullptr) != 1) {
    X509_STORE_CTX_free(ctx);
    return refuse(CertificateError::kUnknownAuthority, OpenSslError());
  }
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_PARTIAL_CHAIN);
  X509_VERIFY_PARAM_set_time(param, static_cast<time_t>(wall_us / 1'000'000));
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
  const bool chained = X509_verify_cert(ctx) == 1;
  const int verify_error = X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  ERR_clear_error();
  if (!chained) {
    std::string why = X509_verify_cert_error_string(verify_error);
    switch (verify_error) {
      case X509_V_ERR_CERT_HAS_EXPIRED:
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return refuse(CertificateError::kExpired, why);
      case X509_V_ERR_INVALID_PURPOSE:
        return refuse(CertificateError::kWrongIdentity,
                      absl::StrCat(why, " (not a TLS client certificate)"));
      default:
        return refuse(CertificateError::kUnknownAuthority, why);
    }
  }

  std::string node, detail;
  if (CheckSubject(cert, &node, &detail) != CertificateError::kNone) {
    return refuse(CertificateError::kWrongIdentity, detail);
  }
  EVP_PKEY* key = X509_get0_pubkey(cert);
  KeyType type;
  if (key == nullptr) return refuse(CertificateError::kUnsupportedKey, "no public key");
  if (CheckKey(key, &type, &detail) != CertificateError::kNone) {
    return refuse(CertificateError::kUnsupportedKey, detail);
  }
  int64_t nb = 0, na = 0;
  if (!TimeMicros(X509_get0_notBefore(cert), &nb) || !TimeMicros(X509_get0_notAfter(cert), &na)) {
    return refuse(CertificateError::kMalformed, "unreadable validity times");
  }

  auto verified = std::shared_ptr<NodeCertificate>(new NodeCertificate());
  verified->modelled_ =
      ca.modelled_signatures() && HasOrganization(cert, kModelledSignatureOrganization);
  verified->node_ = std::move(node);
  verified->der_.assign(der.data(), der.size());
  verified->fingerprint_ = CertificateFingerprint(der);
  verified->key_type_ = type;
  verified->not_before_us_ = nb;
  verified->not_after_us_ = na;
  EVP_PKEY_up_ref(key);
  verified->key_ = key;
  EVP_MD_CTX* tmpl = EVP_MD_CTX_new();
  EVP_PKEY_CTX* pctx = nullptr;
  if (tmpl == nullptr || EVP_DigestVerifyInit(tmpl, &pctx, Sha256(), nullptr, key) != 1 ||
      !SetPadding(pctx, type)) {
    EVP_MD_CTX_free(tmpl);
    return refuse(CertificateError::kUnsupportedKey,
                  absl::StrCat("cannot verify with this key: ", OpenSslError()));
  }
  verified->verify_template_ = tmpl;
  result.certificate = std::move(verified);
  return result;
}

NodeCertificate::~NodeCertificate() {
  EVP_MD_CTX_free(verify_template_);
  EVP_PKEY_free(key_);
}

bool NodeCertificate::VerifySignature(absl::string_view data, absl::string_view signature) const {
  if (modelled_) {
    const std::string expected = ModelledSignature(fingerprint_, data);
    return !expected.empty() && expected.size() == signature.size() &&
           CRYPTO_memcmp(expected.data(), signature.data(), signature.size()) == 0;
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_MD_CTX_copy_ex(ctx, verify_template_) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                             signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
                             data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) ERR_clear_error();
  return ok;
}

// ---------------------------------------------------------------- NodeIdentity

absl::StatusOr<std::unique_ptr<NodeIdentity>> NodeIdentity::FromPem(absl::string_view cert_pem,
                                                                    absl::string_view key_pem) {
  BIO* cbio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* cert = PEM_read_bio_X509(cbio, nullptr, nullptr, nullptr);
  BIO_free(cbio);
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("no PEM certificate in the node's certificate file");
  }
  BIO* kbio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(kbio, nullptr, nullptr, nullptr);
  BIO_free(kbio);
  auto identity = std::unique_ptr<NodeIdentity>(new NodeIdentity());
  identity->key_ = key;  // freed by the destructor on every path below
  struct Free {
    X509* c;
    ~Free() { X509_free(c); }
  } free_cert{cert};
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("no PEM private key in the node's key file");
  }
  if (X509_check_private_key(cert, key) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the private key does not match the node's certificate");
  }
  std::string detail;
  if (CheckKey(key, &identity->key_type_, &detail) != CertificateError::kNone) {
    return absl::InvalidArgumentError(detail);
  }
  if (CheckSubject(cert, &identity->node_, &detail) != CertificateError::kNone) {
    return absl::InvalidArgumentError(detail);
  }
  identity->der_ = Der(cert);
  if (identity->der_.empty() || identity->der_.size() > kMaxCertificateDerBytes) {
    return absl::InvalidArgumentError(absl::StrCat("certificate of ", identity->der_.size(),
                                                   " bytes DER; at most ", kMaxCertificateDerBytes,
                                                   " fit a certificate datagram"));
  }
  identity->fingerprint_ = CertificateFingerprint(identity->der_);
  identity->modelled_ = HasOrganization(cert, kModelledSignatureOrganization);
  return identity;
}

absl::StatusOr<std::unique_ptr<NodeIdentity>> NodeIdentity::FromFiles(const std::string& cert_path,
                                                                      const std::string& key_path) {
  auto cert = ReadFile(cert_path);
  if (!cert.ok()) return cert.status();
  std::string key_text;
  if (key_path == cert_path) {
    key_text = *cert;
  } else {
    auto key = ReadFile(key_path);
    if (!key.ok()) return key.status();
    key_text = std::move(*key);
  }
  auto id = FromPem(*cert, key_text);
  if (!id.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(cert_path, ": ", id.status().message()));
  }
  return id;
}

NodeIdentity::~NodeIdentity() { EVP_PKEY_free(key_); }

absl::StatusOr<std::string> NodeIdentity::Sign(absl::string_view data) const {
  if (modelled_) {
    std::string sig = ModelledSignature(fingerprint_, data);
    if (sig.empty()) return absl::InternalError(absl::StrCat("signing failed: ", OpenSslError()));
    return sig;
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_PKEY_CTX* pctx = nullptr;
  size_t len = 0;
  std::string sig;
  bool ok = ctx != nullptr && EVP_DigestSignInit(ctx, &pctx, Sha256(), nullptr, key_) == 1 &&
            SetPadding(pctx, key_type_);
  // One-shot signing: the size first, then the signature (ECDSA's is shorter
  // than the bound).
  ok = ok && EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()),
                            data.size()) == 1;
  if (ok) {
    sig.resize(len);
    ok = EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                        reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
    sig.resize(len);
  }
  EVP_MD_CTX_free(ctx);
  if (!ok) return absl::InternalError(absl::StrCat("signing failed: ", OpenSslError()));
  return sig;
}

NodeCertificate::Result NodeIdentity::VerifyAgainst(const CertificateAuthority& ca,
                                                    int64_t wall_us) const {
  return NodeCertificate::Verify(der_, ca, wall_us);
}

}  // namespace poolcoord::election
