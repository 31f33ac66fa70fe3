// Certificates for a standalone start (OpenSSL 3): a CA, a serving certificate
// and an admin client certificate in --cert-dir, and an admin kubeconfig, as
// kube-apiserver's self-signed serving and kubeadm's admin.conf do.
//
// Files in the certificate directory:
//   ca.crt / ca.key                 the CA (also the client CA when no
//                                   --client-ca-file is given)
//   apiserver.crt / apiserver.key   serving: SANs localhost, 127.0.0.1, ::1, the
//                                   host name and a specific bind address;
//                                   extendedKeyUsage serverAuth
//   admin.crt / admin.key           CN poolcoord-admin, O system:masters;
//                                   extendedKeyUsage clientAuth
// Keys are ECDSA P-256, PKCS#8 PEM, mode 0600. Existing files are reused and never
// overwritten; a certificate whose key does not match, that its CA did not sign
// or that has expired is an error naming the file, so the operator removes it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace poolcoord::apiservice {

// One certificate and its private key, PEM-encoded.
struct CertKeyPem {
  std::string cert_pem;
  std::string key_pem;
};

struct CertSpec {
  std::string common_name;
  std::vector<std::string> organizations;  // subject O, one RDN each, in order
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;   // "127.0.0.1", "::1"
  bool is_ca = false;
  bool server_auth = false;  // extendedKeyUsage serverAuth
  bool client_auth = false;  // extendedKeyUsage clientAuth
  int valid_days = 365;
  // Seconds added to both ends of the validity window; tests make expired or
  // not-yet-valid certificates with it.
  long validity_offset_seconds = 0;
};

// Creates a key and a certificate, signed by `issuer` or self-signed when issuer
// is nullptr. Errors: InvalidArgument (bad IP, bad issuer PEM), Internal (OpenSSL).
absl::StatusOr<CertKeyPem> CreateCertificate(const CertSpec& spec, const CertKeyPem* issuer);

struct PkiOptions {
  std::string cert_dir;
  std::string tls_cert_file;         // given: no generation at all
  std::string tls_private_key_file;
  std::string client_ca_file;        // given: used as is
  std::string bind_address;          // added to the serving SANs when specific
};

struct PkiResult {
  std::string serving_cert_file;
  std::string serving_key_file;
  std::string client_ca_file;        // "" when client certificates are not verified
  // Set when the certificates were generated (or reused from --cert-dir).
  std::string ca_cert_file;
  std::string admin_cert_file;
  std::string admin_key_file;
  std::vector<std::string> created;  // files written by this call
};

// With tls_cert_file: checks that the pair loads and matches. Otherwise creates
// or reuses the files of the certificate directory. Errors: FailedPrecondition
// with a message naming the file and the fix (mismatched, foreign, expired, half
// a pair present), Internal/NotFound for I/O.
absl::StatusOr<PkiResult> EnsureCertificates(const PkiOptions& options);

// The https URL clients of this process use: 127.0.0.1 for a wildcard bind
// address, else the bind address (IPv6 in brackets).
std::string ServerUrl(const std::string& bind_address, int port);

// Writes an admin kubeconfig embedding the CA and the admin certificate and key
// (certificate-authority-data, client-certificate-data, client-key-data), mode
// 0600. An existing file is replaced only when it is one we wrote (it starts with
// our header line) and differs; a foreign file is FailedPrecondition.
// `*changed` tells whether the file was written.
absl::Status WriteAdminKubeconfig(const std::string& path, const PkiResult& pki,
                                  const std::string& server_url, bool* changed);

// Reads a whole file. NotFound when missing.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace poolcoord::apiservice
