// Certificate material that follows its files while the server runs, as
// k8s.io/apiserver's dynamic certificate controllers do
// (pkg/server/dynamiccertificates: DynamicCertKeyPairContent for the serving
// pair, DynamicFileCAContent for --client-ca-file and
// --requestheader-client-ca-file, DynamicServingCertificateController for the
// TLS configuration new handshakes get).
//
// Behaviour, and why:
// - Each parent directory (and each file, through symlinks) is watched with
//   inotify, so an in-place write, a rename over the file (cert-manager,
//   kubelet-style rotation, `mv`) and a Kubernetes Secret volume's `..data`
//   symlink swap are all seen at once. Events are coalesced for `settle_delay`
//   so that a writer that replaces the certificate and then the key is read
//   once, after both. Every `resync_period` (1 minute, kube's
//   FileRefreshDuration) the files are re-read anyway: the fallback when inotify
//   is unavailable or an event was missed. CheckNow (SIGHUP) re-reads at once.
// - Change is judged by content (bytes), not timestamps, as kube does.
// - New material is checked completely before it is used: the serving pair
//   must parse (every certificate of the chain) and the key must match the
//   leaf; a CA bundle must hold at least one certificate and every
//   "BEGIN CERTIFICATE" block in it must parse (so a half-written bundle is
//   refused rather than cut short). A file that fails keeps the old material
//   in use; the reason is logged once per distinct bad content. An expired
//   serving certificate is loaded (with a warning), as kube does: replacing one
//   expired certificate with another must not wedge the server.
// - Each reload is counted in the metrics registry and logged as an Event would
//   be: reason ServingCertificateReload / CACertificateReload (kube's reasons),
//   or ...ReloadFailed with the reason the file was refused. Metrics:
//     poolcoord_certificate_reloads_total{material,result}   counter
//       material: serving-cert | client-ca | requestheader-client-ca
//       result: success | failure (the file was refused, the old material kept)
//     poolcoord_serving_certificate_expiration_timestamp_seconds   gauge
//       notAfter of the serving certificate new handshakes get (Unix seconds)
// - Listeners run on the thread that found the change; one that returns an
//   error makes the reload a failure (the old material stays current).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/metrics.h"

namespace poolcoord::apiservice {

enum class CertificateMaterial { kServing = 0, kClientCa = 1, kRequestHeaderCa = 2 };
inline constexpr int kCertificateMaterials = 3;

// "serving-cert", "client-ca", "requestheader-client-ca": the metric label.
const char* CertificateMaterialName(CertificateMaterial material);

// A serving certificate chain and its key that load and match.
struct ServingCertificate {
  std::string cert_pem;  // leaf first, then intermediates
  std::string key_pem;
  std::string serial;    // leaf serial, upper-case hex ("0A1B...")
  std::string subject_cn;
  std::string issuer_cn;
  std::vector<std::string> names;  // DNS and IP SANs of the leaf
  int64_t not_before_unix = 0;
  int64_t not_after_unix = 0;

  // `"CN" [serving] validServingFor=[a,b] issuer="CA" serial=.. (from to to)`,
  // in the spirit of kube's GetHumanCertDetail.
  std::string Describe() const;
};

// Checks a serving pair. InvalidArgument saying what is wrong (no certificate,
// a chain entry that does not parse, no or a broken key, key and leaf do not
// match).
absl::StatusOr<ServingCertificate> ParseServingCertificate(const std::string& cert_pem,
                                                           const std::string& key_pem);

// Checks a CA bundle: at least one certificate, every certificate block parses.
// Returns each certificate's subject CN (or full subject when it has no CN), in
// order. InvalidArgument otherwise.
absl::StatusOr<std::vector<std::string>> ParseCaBundle(const std::string& pem);

struct DynamicCertificatesOptions {
  // The serving pair (both or neither) and the CA bundles; "" = not followed.
  std::string serving_cert_file;
  std::string serving_key_file;
  std::string client_ca_file;
  std::string requestheader_client_ca_file;
  std::chrono::milliseconds resync_period{60'000};
  std::chrono::milliseconds settle_delay{200};
  bool use_inotify = true;  // false: the periodic re-read alone (tests)
  // Where the reload metrics register; not owned, must outlive this object.
  // nullptr: a registry of its own (tests read Reloads()).
  base::MetricsRegistry* registry = nullptr;
};

class DynamicCertificates {
 public:
  // Called with the material that changed; the new content is already current
  // (serving(), ca_pem()). Returning an error fails the reload.
  using Listener = std::function<absl::Status(CertificateMaterial)>;

  // Reads and checks every configured file. Errors name the flag and the file
  // (NotFound, InvalidArgument): at start a bad file is fatal.
  static absl::StatusOr<std::unique_ptr<DynamicCertificates>> Create(
      DynamicCertificatesOptions options);
  ~DynamicCertificates();
  DynamicCertificates(const DynamicCertificates&) = delete;
  DynamicCertificates& operator=(const DynamicCertificates&) = delete;

  // The current material. serving() is nullptr without a serving pair; ca_pem
  // is "" for a bundle that is not configured. Thread-safe.
  std::shared_ptr<const ServingCertificate> serving() const;
  std::string ca_pem(CertificateMaterial material) const;

  // Before Start; listeners run in the order added.
  void AddListener(Listener listener);

  // Starts the watching thread; Stop joins it (idempotent; the destructor stops).
  void Start();
  void Stop();

  // Re-reads every file now and applies what changed, on the calling thread
  // (SIGHUP; the watching thread calls it too). Thread-safe.
  void CheckNow();

  // Reloads so far, by material and outcome (the initial load is not one).
  uint64_t Reloads(CertificateMaterial material, bool success) const;

 private:
  struct Tracked {
    std::string applied;  // content now in use ("" when not configured)
    std::string failed;   // last refused content, so it is logged once
  };
  explicit DynamicCertificates(DynamicCertificatesOptions options);
  absl::Status LoadInitial();
  void CheckServing() ABSL_EXCLUSIVE_LOCKS_REQUIRED(check_mu_);
  void CheckCa(CertificateMaterial material, const std::string& file)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(check_mu_);
  absl::Status Notify(CertificateMaterial material) ABSL_EXCLUSIVE_LOCKS_REQUIRED(check_mu_);
  void Run();
  void UpdateWatches();
  std::vector<std::string> WatchedFiles() const;

  const DynamicCertificatesOptions options_;
  std::vector<Listener> listeners_;

  absl::Mutex check_mu_;  // one check at a time (the thread and CheckNow)
  std::array<Tracked, kCertificateMaterials> tracked_ ABSL_GUARDED_BY(check_mu_);

  mutable absl::Mutex mu_;  // the current material, read by anyone
  std::shared_ptr<const ServingCertificate> serving_ ABSL_GUARDED_BY(mu_);
  std::array<std::string, kCertificateMaterials> ca_pem_ ABSL_GUARDED_BY(mu_);

  std::unique_ptr<base::MetricsRegistry> own_registry_;  // when none was given
  // [material][0 = failure, 1 = success], series of the registry's family.
  std::array<std::array<base::Counter*, 2>, kCertificateMaterials> reloads_{};
  base::Gauge* expiration_ = nullptr;

  // The watching thread.
  int inotify_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop
  struct Watch {
    std::string path;
    int wd;
  };
  std::vector<Watch> watches_;  // owned by the thread once started
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace poolcoord::apiservice
