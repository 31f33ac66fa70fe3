#include "election/minted_pki.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace poolcoord::election {
namespace {

absl::Status Fail(absl::string_view what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return absl::InternalError(absl::StrCat(what, ": ", buf));
}

EVP_PKEY* NewKey(const MintOptions& o) {
  if (!o.key_pem.empty()) {
    BIO* bio = BIO_new_mem_buf(o.key_pem.data(), static_cast<int>(o.key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    return key;
  }
  if (o.key_type == KeyType::kRsa) return EVP_RSA_gen(static_cast<unsigned int>(o.rsa_bits));
  return EVP_EC_gen(o.ec_curve.c_str());
}

std::string Pem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(len));
  BIO_free(bio);
  return out;
}

std::string Pem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(len));
  BIO_free(bio);
  return out;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// Builds and signs one certificate. `issuer`/`issuer_key` null: self-signed.
absl::StatusOr<MintedKeyPair> Mint(const MintOptions& o, X509* issuer, EVP_PKEY* issuer_key,
                                   bool is_ca) {
  EVP_PKEY* key = NewKey(o);
  if (key == nullptr) return Fail("key generation");
  X509* cert = X509_new();
  struct Free {
    EVP_PKEY* k;
    X509* c;
    ~Free() {
      EVP_PKEY_free(k);
      X509_free(c);
    }
  } guard{key, cert};

  X509_set_version(cert, 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
  BN_free(bn);

  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  const int64_t nb = o.not_before_us != 0 ? o.not_before_us / 1'000'000 : now_s - 3600;
  const int64_t na = o.not_after_us != 0 ? o.not_after_us / 1'000'000 : now_s + 365 * 86400;
  ASN1_TIME_set(X509_getm_notBefore(cert), static_cast<time_t>(nb));
  ASN1_TIME_set(X509_getm_notAfter(cert), static_cast<time_t>(na));

  X509_NAME* name = X509_get_subject_name(cert);
  for (const std::string& org : o.organizations) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1, 0);
  }
  if (!o.common_name.empty()) {
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(o.common_name.c_str()), -1, -1,
                               0);
  }
  X509_set_issuer_name(cert, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509_set_pubkey(cert, key);

  X509* ext_issuer = issuer != nullptr ? issuer : cert;
  if (is_ca) {
    if (!AddExtension(cert, ext_issuer, NID_basic_constraints, "critical,CA:TRUE") ||
        !AddExtension(cert, ext_issuer, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !AddExtension(cert, ext_issuer, NID_subject_key_identifier, "hash")) {
      return Fail("CA extensions");
    }
  } else {
    if (!AddExtension(cert, ext_issuer, NID_basic_constraints, "critical,CA:FALSE") ||
        !AddExtension(cert, ext_issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment") ||
        (!o.extended_key_usage.empty() &&
         !AddExtension(cert, ext_issuer, NID_ext_key_usage, o.extended_key_usage.c_str()))) {
      return Fail("leaf extensions");
    }
  }
  if (X509_sign(cert, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) <= 0) {
    return Fail("signing the certificate");
  }
  return MintedKeyPair{Pem(cert), Pem(key)};
}

}  // namespace

absl::StatusOr<MintedKeyPair> MintCertificateAuthority(const std::string& common_name,
                                                       const MintOptions& options) {
  MintOptions o = options;
  o.common_name = common_name;
  return Mint(o, nullptr, nullptr, /*is_ca=*/true);
}

absl::StatusOr<MintedKeyPair> MintCertificate(const MintedKeyPair& ca, const MintOptions& options) {
  BIO* cbio = BIO_new_mem_buf(ca.cert_pem.data(), static_cast<int>(ca.cert_pem.size()));
  X509* ca_cert = PEM_read_bio_X509(cbio, nullptr, nullptr, nullptr);
  BIO_free(cbio);
  BIO* kbio = BIO_new_mem_buf(ca.key_pem.data(), static_cast<int>(ca.key_pem.size()));
  EVP_PKEY* ca_key = PEM_read_bio_PrivateKey(kbio, nullptr, nullptr, nullptr);
  BIO_free(kbio);
  absl::StatusOr<MintedKeyPair> out =
      (ca_cert == nullptr || ca_key == nullptr) ? Fail("reading the CA")
                                                : Mint(options, ca_cert, ca_key, options.is_ca);
  X509_free(ca_cert);
  EVP_PKEY_free(ca_key);
  return out;
}

absl::StatusOr<MintedKeyPair> MintNodeCertificate(const MintedKeyPair& ca, const std::string& node,
                                                  KeyType key_type) {
  MintOptions o;
  o.key_type = key_type;
  o.common_name = absl::StrCat(kNodeUserPrefix, node);
  o.organizations = {kNodesGroup};
  return MintCertificate(ca, o);
}

}  // namespace poolcoord::election
