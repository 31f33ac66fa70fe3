#define BOOST_TEST_MODULE apiservice_pki
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "apiservice/pki.h"

namespace poolcoord::apiservice {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "pki_test.XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const char* name) const { return (fs::path(path) / name).string(); }
  std::string path;
};

X509* LoadCert(const std::string& file) {
  std::string pem = *ReadFileToString(file);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

std::string Subject(X509* cert) {
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  return buf;
}

mode_t Mode(const std::string& file) {
  struct stat st;
  stat(file.c_str(), &st);
  return st.st_mode & 0777;
}

PkiOptions Options(const TempDir& dir) {
  PkiOptions o;
  o.cert_dir = dir / "certs";
  o.bind_address = "0.0.0.0";
  return o;
}

BOOST_AUTO_TEST_SUITE(PkiTest)

BOOST_AUTO_TEST_CASE(GeneratesCaServingAndAdmin) {
  TempDir dir;
  absl::StatusOr<PkiResult> r = EnsureCertificates(Options(dir));
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST(r->created.size() == 6u);
  BOOST_TEST(r->client_ca_file == dir / "certs/ca.crt");
  for (const char* key : {"certs/ca.key", "certs/apiserver.key", "certs/admin.key"}) {
    BOOST_TEST(Mode(dir / key) == 0600u, key);
  }

  X509* serving = LoadCert(r->serving_cert_file);
  BOOST_REQUIRE(serving != nullptr);
  BOOST_TEST(X509_check_host(serving, "localhost", 0, 0, nullptr) == 1);
  BOOST_TEST(X509_check_ip_asc(serving, "127.0.0.1", 0) == 1);
  BOOST_TEST(X509_check_ip_asc(serving, "::1", 0) == 1);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  BOOST_TEST(X509_check_host(serving, host, 0, 0, nullptr) == 1);
  BOOST_TEST(X509_check_purpose(serving, X509_PURPOSE_SSL_SERVER, 0) == 1);

  X509* admin = LoadCert(r->admin_cert_file);
  BOOST_REQUIRE(admin != nullptr);
  BOOST_TEST(Subject(admin).find("O=system:masters") != std::string::npos);
  BOOST_TEST(Subject(admin).find("CN=poolcoord-admin") != std::string::npos);
  BOOST_TEST(X509_check_purpose(admin, X509_PURPOSE_SSL_CLIENT, 0) == 1);

  // Both chain to the CA.
  X509* ca = LoadCert(r->ca_cert_file);
  BOOST_TEST(X509_verify(serving, X509_get0_pubkey(ca)) == 1);
  BOOST_TEST(X509_verify(admin, X509_get0_pubkey(ca)) == 1);
  X509_free(ca);
  X509_free(admin);
  X509_free(serving);
}

BOOST_AUTO_TEST_CASE(SpecificBindAddressIsASan) {
  TempDir dir;
  PkiOptions o = Options(dir);
  o.bind_address = "10.1.2.3";
  absl::StatusOr<PkiResult> r = EnsureCertificates(o);
  BOOST_REQUIRE(r.ok());
  X509* serving = LoadCert(r->serving_cert_file);
  BOOST_TEST(X509_check_ip_asc(serving, "10.1.2.3", 0) == 1);
  X509_free(serving);
}

BOOST_AUTO_TEST_CASE(ReusesWithoutOverwriting) {
  TempDir dir;
  absl::StatusOr<PkiResult> first = EnsureCertificates(Options(dir));
  BOOST_REQUIRE(first.ok());
  std::string ca = *ReadFileToString(dir / "certs/ca.crt");
  std::string key = *ReadFileToString(dir / "certs/apiserver.key");
  absl::StatusOr<PkiResult> second = EnsureCertificates(Options(dir));
  BOOST_REQUIRE(second.ok());
  BOOST_TEST(second->created.empty());
  BOOST_TEST(*ReadFileToString(dir / "certs/ca.crt") == ca);
  BOOST_TEST(*ReadFileToString(dir / "certs/apiserver.key") == key);
}

BOOST_AUTO_TEST_CASE(MismatchedPairIsAnError) {
  TempDir dir;
  BOOST_REQUIRE(EnsureCertificates(Options(dir)).ok());
  // Swap in the admin key for the serving key.
  fs::remove(dir / "certs/apiserver.key");
  fs::copy_file(dir / "certs/admin.key", dir / "certs/apiserver.key");
  std::string before = *ReadFileToString(dir / "certs/apiserver.crt");
  absl::StatusOr<PkiResult> r = EnsureCertificates(Options(dir));
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == absl::StatusCode::kFailedPrecondition);
  BOOST_TEST(std::string(r.status().message()).find("apiserver.crt does not match") !=
             std::string::npos);
  BOOST_TEST(*ReadFileToString(dir / "certs/apiserver.crt") == before);
}

BOOST_AUTO_TEST_CASE(HalfAPairIsAnError) {
  TempDir dir;
  BOOST_REQUIRE(EnsureCertificates(Options(dir)).ok());
  fs::remove(dir / "certs/admin.crt");
  absl::StatusOr<PkiResult> r = EnsureCertificates(Options(dir));
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(std::string(r.status().message()).find("admin.key") != std::string::npos);
  BOOST_TEST(!fs::exists(dir / "certs/admin.crt"));
}

BOOST_AUTO_TEST_CASE(LeafFromAnotherCaIsAnError) {
  TempDir dir;
  BOOST_REQUIRE(EnsureCertificates(Options(dir)).ok());
  fs::remove(dir / "certs/ca.crt");
  fs::remove(dir / "certs/ca.key");
  absl::StatusOr<PkiResult> r = EnsureCertificates(Options(dir));
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(std::string(r.status().message()).find("not issued by the CA") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(GivenCertificatesAreCheckedNotGenerated) {
  TempDir dir;
  CertSpec ca_spec;
  ca_spec.common_name = "ca";
  ca_spec.is_ca = true;
  absl::StatusOr<CertKeyPem> ca = CreateCertificate(ca_spec, nullptr);
  CertSpec leaf_spec;
  leaf_spec.common_name = "server";
  leaf_spec.server_auth = true;
  absl::StatusOr<CertKeyPem> leaf = CreateCertificate(leaf_spec, &*ca);
  BOOST_REQUIRE(ca.ok() && leaf.ok());
  std::ofstream(dir / "s.crt") << leaf->cert_pem;
  std::ofstream(dir / "s.key") << leaf->key_pem;
  std::ofstream(dir / "other.key") << ca->key_pem;
  PkiOptions o = Options(dir);
  o.tls_cert_file = dir / "s.crt";
  o.tls_private_key_file = dir / "s.key";
  absl::StatusOr<PkiResult> r = EnsureCertificates(o);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->created.empty());
  BOOST_TEST(r->client_ca_file == "");
  BOOST_TEST(!fs::exists(dir / "certs"));
  o.tls_private_key_file = dir / "other.key";
  BOOST_TEST(!EnsureCertificates(o).ok());
}

BOOST_AUTO_TEST_CASE(KubeconfigEmbedsCredentialsAndRefusesForeignFiles) {
  TempDir dir;
  absl::StatusOr<PkiResult> r = EnsureCertificates(Options(dir));
  BOOST_REQUIRE(r.ok());
  std::string path = dir / "kube/admin.kubeconfig";
  bool changed = false;
  BOOST_REQUIRE(WriteAdminKubeconfig(path, *r, ServerUrl("0.0.0.0", 8443), &changed).ok());
  BOOST_TEST(changed);
  BOOST_TEST(Mode(path) == 0600u);
  std::string text = *ReadFileToString(path);
  BOOST_TEST(text.find("server: https://127.0.0.1:8443\n") != std::string::npos);
  for (const char* field :
       {"certificate-authority-data: ", "client-certificate-data: ", "client-key-data: "}) {
    BOOST_TEST(text.find(field) != std::string::npos, field);
  }
  // Same content: untouched. New port: rewritten (it is ours).
  BOOST_REQUIRE(WriteAdminKubeconfig(path, *r, ServerUrl("0.0.0.0", 8443), &changed).ok());
  BOOST_TEST(!changed);
  BOOST_REQUIRE(WriteAdminKubeconfig(path, *r, ServerUrl("::1", 9000), &changed).ok());
  BOOST_TEST(changed);
  BOOST_TEST(ReadFileToString(path)->find("server: https://[::1]:9000\n") != std::string::npos);
  // Someone else's file is never replaced.
  std::string foreign = dir / "foreign.kubeconfig";
  std::ofstream(foreign) << "apiVersion: v1\nkind: Config\n";
  absl::Status st = WriteAdminKubeconfig(foreign, *r, ServerUrl("0.0.0.0", 8443), &changed);
  BOOST_TEST(st.code() == absl::StatusCode::kFailedPrecondition);
  BOOST_TEST(*ReadFileToString(foreign) == "apiVersion: v1\nkind: Config\n");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
