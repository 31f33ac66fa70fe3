#define BOOST_TEST_MODULE apiservice_dynamic_certificates
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "apiservice/dynamic_certificates.h"
#include "apiservice/pki.h"

namespace poolcoord::apiservice {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

CertKeyPem MakeCa(const std::string& cn) {
  CertSpec spec;
  spec.common_name = cn;
  spec.is_ca = true;
  return *CreateCertificate(spec, nullptr);
}

CertKeyPem MakeServing(const CertKeyPem& ca, const std::string& cn, long offset_seconds = 0) {
  CertSpec spec;
  spec.common_name = cn;
  spec.server_auth = true;
  spec.dns_names = {"localhost"};
  spec.ip_addresses = {"127.0.0.1"};
  spec.valid_days = 1;
  spec.validity_offset_seconds = offset_seconds;
  return *CreateCertificate(spec, &ca);
}

std::string SerialOf(const CertKeyPem& pair) {
  return ParseServingCertificate(pair.cert_pem, pair.key_pem)->serial;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc);
  out << content;
}

// Written beside, then renamed over: what cert-manager's and kubelet's
// rotation (and `mv`) do.
void ReplaceByRename(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  WriteFile(tmp, content);
  fs::rename(tmp, path);
}

// Polls `done` until it holds or 20 s pass (inotify answers within
// milliseconds; the bound is for a loaded machine).
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

struct Fixture {
  Fixture() {
    std::string tmpl = (fs::temp_directory_path() / "dyncert_test.XXXXXX").string();
    dir = mkdtemp(tmpl.data());
    ca = MakeCa("serving-ca");
    first = MakeServing(ca, "first");
    client_ca = MakeCa("client-ca-1");
    proxy_ca = MakeCa("front-proxy-ca-1");
    WriteFile(Path("tls.crt"), first.cert_pem);
    WriteFile(Path("tls.key"), first.key_pem);
    WriteFile(Path("client-ca.crt"), client_ca.cert_pem);
    WriteFile(Path("proxy-ca.crt"), proxy_ca.cert_pem);
    options.serving_cert_file = Path("tls.crt");
    options.serving_key_file = Path("tls.key");
    options.client_ca_file = Path("client-ca.crt");
    options.requestheader_client_ca_file = Path("proxy-ca.crt");
    options.resync_period = std::chrono::hours(1);  // inotify alone, unless a test says
    options.settle_delay = std::chrono::milliseconds(50);
    options.registry = &registry;
  }
  ~Fixture() {
    certs.reset();
    fs::remove_all(dir);
  }
  std::string Path(const std::string& name) const { return (fs::path(dir) / name).string(); }

  // Creates, records what listeners hear, and starts.
  void Make(bool start = true) {
    absl::StatusOr<std::unique_ptr<DynamicCertificates>> made = DynamicCertificates::Create(options);
    BOOST_REQUIRE_MESSAGE(made.ok(), made.status().ToString());
    certs = *std::move(made);
    certs->AddListener([this](CertificateMaterial m) {
      absl::MutexLock lock(&mu);
      heard.push_back(m);
      return refuse ? absl::InvalidArgumentError("refused by the listener") : absl::OkStatus();
    });
    if (start) certs->Start();
  }
  std::string Serial() { return certs->serving()->serial; }
  size_t Heard(CertificateMaterial m) {
    absl::MutexLock lock(&mu);
    size_t n = 0;
    for (CertificateMaterial h : heard) n += h == m;
    return n;
  }

  std::string dir;
  CertKeyPem ca, first, client_ca, proxy_ca;
  base::MetricsRegistry registry;  // before certs: outlives it
  DynamicCertificatesOptions options;
  std::unique_ptr<DynamicCertificates> certs;
  absl::Mutex mu;
  std::vector<CertificateMaterial> heard;
  std::atomic<bool> refuse{false};
};

BOOST_AUTO_TEST_SUITE(Parsing)

BOOST_AUTO_TEST_CASE(AGoodPairIsDescribed) {
  CertKeyPem ca = MakeCa("serving-ca");
  CertKeyPem pair = MakeServing(ca, "poolcoord-apiserver");
  absl::StatusOr<ServingCertificate> s = ParseServingCertificate(pair.cert_pem + ca.cert_pem, pair.key_pem);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  BOOST_TEST(s->subject_cn == "poolcoord-apiserver");
  BOOST_TEST(s->issuer_cn == "serving-ca");
  BOOST_TEST(s->names == (std::vector<std::string>{"localhost", "127.0.0.1"}));
  BOOST_TEST(!s->serial.empty());
  const int64_t now = std::time(nullptr);
  BOOST_TEST(s->not_before_unix <= now);
  BOOST_TEST(s->not_after_unix > now + 86000);  // valid_days = 1
  BOOST_TEST(s->not_after_unix <= now + 86400 + 60);
  BOOST_TEST(s->Describe().find("validServingFor=[localhost,127.0.0.1]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(BrokenPairsSayWhy) {
  CertKeyPem ca = MakeCa("serving-ca");
  CertKeyPem a = MakeServing(ca, "a");
  CertKeyPem b = MakeServing(ca, "b");
  auto why = [](const std::string& cert, const std::string& key) {
    absl::StatusOr<ServingCertificate> s = ParseServingCertificate(cert, key);
    BOOST_REQUIRE(!s.ok());
    BOOST_TEST(absl::IsInvalidArgument(s.status()));
    return std::string(s.status().message());
  };
  BOOST_TEST(why(a.cert_pem, b.key_pem).find("does not match") != std::string::npos);
  // Half-written: cut inside the base64 of the certificate.
  BOOST_TEST(why(a.cert_pem.substr(0, a.cert_pem.size() / 2), a.key_pem).find("certificate") !=
             std::string::npos);
  // A chain whose second certificate is cut short.
  BOOST_TEST(why(a.cert_pem + ca.cert_pem.substr(0, 100), a.key_pem).find("2 of 2") !=
             std::string::npos);
  BOOST_TEST(why("", a.key_pem).find("empty") != std::string::npos);
  BOOST_TEST(why(a.cert_pem, "").find("empty") != std::string::npos);
  BOOST_TEST(why(a.cert_pem, a.key_pem.substr(0, 60)).find("private key") != std::string::npos);
  BOOST_TEST(why("not pem at all", a.key_pem).find("no PEM certificate") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(CaBundlesAreReadStrictly) {
  CertKeyPem one = MakeCa("one");
  CertKeyPem two = MakeCa("two");
  absl::StatusOr<std::vector<std::string>> both = ParseCaBundle(one.cert_pem + two.cert_pem);
  BOOST_REQUIRE(both.ok());
  BOOST_TEST(*both == (std::vector<std::string>{"one", "two"}));
  // An append caught half-way is refused, not read as the first certificate only.
  BOOST_TEST(!ParseCaBundle(one.cert_pem + two.cert_pem.substr(0, 200)).ok());
  BOOST_TEST(!ParseCaBundle("").ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(Following, Fixture)

BOOST_AUTO_TEST_CASE(ABadFileAtStartIsAnErrorNamingIt) {
  WriteFile(Path("client-ca.crt"), "garbage");
  absl::StatusOr<std::unique_ptr<DynamicCertificates>> made = DynamicCertificates::Create(options);
  BOOST_REQUIRE(!made.ok());
  BOOST_TEST(std::string(made.status().message()).find(Path("client-ca.crt")) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(AServingPairReplacedInPlaceIsLoaded) {
  Make();
  const std::string old_serial = Serial();
  CertKeyPem next = MakeServing(ca, "second");
  WriteFile(Path("tls.crt"), next.cert_pem);
  WriteFile(Path("tls.key"), next.key_pem);
  BOOST_REQUIRE(Eventually([&] { return Serial() == SerialOf(next); }));
  BOOST_TEST(Serial() != old_serial);
  BOOST_TEST(certs->serving()->subject_cn == "second");
  BOOST_TEST(Heard(CertificateMaterial::kServing) >= 1u);
  BOOST_TEST(certs->Reloads(CertificateMaterial::kServing, true) >= 1u);
}

BOOST_AUTO_TEST_CASE(AServingPairReplacedByRenameIsLoaded) {
  Make();
  CertKeyPem next = MakeServing(ca, "renamed");
  ReplaceByRename(Path("tls.key"), next.key_pem);
  ReplaceByRename(Path("tls.crt"), next.cert_pem);
  BOOST_REQUIRE(Eventually([&] { return Serial() == SerialOf(next); }));
  // The watch survives the rename: a second rotation is seen too.
  CertKeyPem third = MakeServing(ca, "third");
  ReplaceByRename(Path("tls.key"), third.key_pem);
  ReplaceByRename(Path("tls.crt"), third.cert_pem);
  BOOST_REQUIRE(Eventually([&] { return Serial() == SerialOf(third); }));
}

// A Kubernetes Secret volume: tls.crt -> ..data/tls.crt, ..data -> ..<version>;
// an update writes a new version directory and renames a new ..data symlink
// over the old one.
BOOST_AUTO_TEST_CASE(ASecretVolumeSymlinkSwapIsLoaded) {
  fs::create_directory(Path("..v1"));
  WriteFile(Path("..v1/tls.crt"), first.cert_pem);
  WriteFile(Path("..v1/tls.key"), first.key_pem);
  fs::create_directory_symlink("..v1", Path("..data"));
  fs::remove(Path("tls.crt"));
  fs::remove(Path("tls.key"));
  fs::create_symlink("..data/tls.crt", Path("tls.crt"));
  fs::create_symlink("..data/tls.key", Path("tls.key"));
  Make();
  BOOST_TEST(Serial() == SerialOf(first));
  CertKeyPem next = MakeServing(ca, "from-secret");
  fs::create_directory(Path("..v2"));
  WriteFile(Path("..v2/tls.crt"), next.cert_pem);
  WriteFile(Path("..v2/tls.key"), next.key_pem);
  fs::create_directory_symlink("..v2", Path("..data_tmp"));
  fs::rename(Path("..data_tmp"), Path("..data"));
  fs::remove_all(Path("..v1"));
  BOOST_REQUIRE(Eventually([&] { return Serial() == SerialOf(next); }));
}

BOOST_AUTO_TEST_CASE(ABrokenFileKeepsTheOldPairAndIsCountedOnce) {
  Make();
  const std::string old_serial = Serial();
  CertKeyPem next = MakeServing(ca, "next");
  // Half-written certificate (each content appears at once, so the counts are exact).
  ReplaceByRename(Path("tls.crt"), next.cert_pem.substr(0, next.cert_pem.size() / 2));
  BOOST_REQUIRE(Eventually([&] { return certs->Reloads(CertificateMaterial::kServing, false) == 1; }));
  BOOST_TEST(Serial() == old_serial);
  // The other half of the rotation is still missing: a certificate whose key
  // is not there yet does not match.
  ReplaceByRename(Path("tls.crt"), next.cert_pem);
  BOOST_REQUIRE(Eventually([&] { return certs->Reloads(CertificateMaterial::kServing, false) == 2; }));
  BOOST_TEST(Serial() == old_serial);
  // Re-reading the same broken content is not another failure.
  certs->CheckNow();
  certs->CheckNow();
  BOOST_TEST(certs->Reloads(CertificateMaterial::kServing, false) == 2u);
  BOOST_TEST(Heard(CertificateMaterial::kServing) == 0u);
  ReplaceByRename(Path("tls.key"), next.key_pem);
  BOOST_REQUIRE(Eventually([&] { return Serial() == SerialOf(next); }));
  BOOST_TEST(certs->Reloads(CertificateMaterial::kServing, true) == 1u);
  const std::string metrics = registry.Render();
  BOOST_TEST(metrics.find("poolcoord_certificate_reloads_total{material=\"serving-cert\",result="
                          "\"failure\"} 2") != std::string::npos);
  BOOST_TEST(metrics.find("poolcoord_certificate_reloads_total{material=\"serving-cert\",result="
                          "\"success\"} 1") != std::string::npos);
  BOOST_TEST(metrics.find("poolcoord_serving_certificate_expiration_timestamp_seconds " +
                          std::to_string(certs->serving()->not_after_unix)) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(AListenerThatRefusesKeepsTheOldPair) {
  Make();
  const std::string old_serial = Serial();
  refuse = true;
  CertKeyPem next = MakeServing(ca, "next");
  ReplaceByRename(Path("tls.key"), next.key_pem);
  ReplaceByRename(Path("tls.crt"), next.cert_pem);
  BOOST_REQUIRE(Eventually([&] { return certs->Reloads(CertificateMaterial::kServing, false) >= 1; }));
  BOOST_TEST(Serial() == old_serial);
}

BOOST_AUTO_TEST_CASE(AnExpiredPairIsReplacedByAFreshOne) {
  CertKeyPem expired = MakeServing(ca, "expired", -3 * 86400);
  WriteFile(Path("tls.crt"), expired.cert_pem);
  WriteFile(Path("tls.key"), expired.key_pem);
  Make();  // loaded (with a warning), as kube loads one
  BOOST_TEST(certs->serving()->not_after_unix < std::time(nullptr));
  CertKeyPem fresh = MakeServing(ca, "fresh");
  ReplaceByRename(Path("tls.key"), fresh.key_pem);
  ReplaceByRename(Path("tls.crt"), fresh.cert_pem);
  BOOST_REQUIRE(Eventually([&] { return Serial() == SerialOf(fresh); }));
  BOOST_TEST(certs->serving()->not_after_unix > std::time(nullptr));
}

BOOST_AUTO_TEST_CASE(ACaAppendedToTheClientBundleIsLoaded) {
  Make();
  CertKeyPem second = MakeCa("client-ca-2");
  {
    std::ofstream out(Path("client-ca.crt"), std::ios::app);
    out << second.cert_pem;
  }
  BOOST_REQUIRE(Eventually([&] {
    return certs->ca_pem(CertificateMaterial::kClientCa) == client_ca.cert_pem + second.cert_pem;
  }));
  BOOST_TEST(Heard(CertificateMaterial::kClientCa) == 1u);
  BOOST_TEST(Heard(CertificateMaterial::kRequestHeaderCa) == 0u);
  CertKeyPem proxy2 = MakeCa("front-proxy-ca-2");
  ReplaceByRename(Path("proxy-ca.crt"), proxy2.cert_pem);
  BOOST_REQUIRE(Eventually(
      [&] { return certs->ca_pem(CertificateMaterial::kRequestHeaderCa) == proxy2.cert_pem; }));
  BOOST_TEST(certs->Reloads(CertificateMaterial::kRequestHeaderCa, true) == 1u);
}

BOOST_AUTO_TEST_CASE(WithoutInotifyThePeriodicReReadFindsChanges) {
  options.use_inotify = false;
  options.resync_period = std::chrono::milliseconds(100);
  Make();
  CertKeyPem next = MakeServing(ca, "polled");
  ReplaceByRename(Path("tls.key"), next.key_pem);
  ReplaceByRename(Path("tls.crt"), next.cert_pem);
  BOOST_REQUIRE(Eventually([&] { return Serial() == SerialOf(next); }));
}

BOOST_AUTO_TEST_CASE(CheckNowAppliesAtOnce) {
  Make(/*start=*/false);  // no thread: only CheckNow reads (SIGHUP)
  CertKeyPem next = MakeServing(ca, "sighup");
  WriteFile(Path("tls.crt"), next.cert_pem);
  WriteFile(Path("tls.key"), next.key_pem);
  BOOST_TEST(Serial() == SerialOf(first));
  certs->CheckNow();
  BOOST_TEST(Serial() == SerialOf(next));
  BOOST_TEST(Heard(CertificateMaterial::kServing) == 1u);
}

BOOST_AUTO_TEST_CASE(AMissingFileIsAFailureUntilItReturns) {
  Make();
  fs::rename(Path("client-ca.crt"), Path("client-ca.crt.away"));
  BOOST_REQUIRE(Eventually([&] { return certs->Reloads(CertificateMaterial::kClientCa, false) == 1; }));
  BOOST_TEST(certs->ca_pem(CertificateMaterial::kClientCa) == client_ca.cert_pem);
  fs::rename(Path("client-ca.crt.away"), Path("client-ca.crt"));
  // Back with the content in use: nothing to reload, and no further failure.
  certs->CheckNow();
  BOOST_TEST(certs->Reloads(CertificateMaterial::kClientCa, false) == 1u);
  BOOST_TEST(certs->Reloads(CertificateMaterial::kClientCa, true) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::apiservice
