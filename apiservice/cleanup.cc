#include "apiservice/cleanup.h"

#include <chrono>

#include "absl/time/time.h"
#include "base/clock.h"
#include "base/log.h"
#include "cloud/clientset.h"
#include "cloud/rest_client.h"
#include "controllers/cleanup.h"

namespace poolcoord::apiservice {

int RunCleanup(const ServerOptions& options) {
  absl::StatusOr<cloud::RestConfig> config = options.kubeconfig.empty()
                                                 ? cloud::InClusterConfig()
                                                 : cloud::LoadKubeconfig(options.kubeconfig);
  if (!config.ok()) {
    base::LogError("--cleanup needs the cloud cluster: ",
                   options.kubeconfig.empty() ? "no --kubeconfig, and the in-cluster config: "
                                              : "--kubeconfig: ",
                   config.status().message());
    return 1;
  }
  base::SetLogVerbosity(options.verbosity);
  config->user_agent = "poolcoord-cleanup";
  absl::StatusOr<std::unique_ptr<cloud::RestClient>> rest = cloud::RestClient::New(*config);
  if (!rest.ok()) {
    base::LogError("--cleanup: ", rest.status().message());
    return 1;
  }
  cloud::Clientset clients(rest->get());
  controllers::CleanupOptions co;
  co.quiet_period = absl::ToChronoMicroseconds(options.kubelet_renew_interval +
                                               ForwarderRequestTimeout(options));
  co.timeout = absl::ToChronoMicroseconds(options.cleanup_timeout);
  base::LogInfo("cleanup: removing poolcoord's marks from ", (*rest)->config().server,
                "; passes ", absl::FormatDuration(absl::FromChrono(co.quiet_period)),
                " apart until one finds nothing, for at most ",
                absl::FormatDuration(options.cleanup_timeout));
  absl::StatusOr<controllers::CleanupReport> report = controllers::Cleanup(
      controllers::CleanupCloud{clients.Leases("kube-node-lease"), clients.Nodes()},
      base::RealClock::Get(), co);
  if (!report.ok()) {
    base::LogError("cleanup: ", report.status().message());
    return 1;
  }
  base::LogInfo("cleanup: done after ", report->passes, " passes: the marks of ",
                report->leases_cleared, " Lease(s) and ", report->taints_removed,
                " taint(s) removed; nothing of poolcoord's is left");
  return 0;
}

}  // namespace poolcoord::apiservice
