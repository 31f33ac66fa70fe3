// poolcoord-apiserver --cleanup: the process side of controllers/cleanup.h
// (which marks, how, and why the passes repeat). It connects to the cloud
// cluster as the server does (--kubeconfig, else the in-cluster service
// account) and logs each pass.
#pragma once

#include "apiservice/flags.h"

namespace poolcoord::apiservice {

// Runs the cleanup to its end. Returns the exit status: 0 once a pass found
// nothing to clear; 1 when there is no cloud cluster to reach (no
// --kubeconfig and not in a pod) or --cleanup-timeout passed first (the reason
// is logged). The passes are one --kubelet-renew-interval plus the
// forwarder's request timeout (ForwarderRequestTimeout) apart.
int RunCleanup(const ServerOptions& options);

}  // namespace poolcoord::apiservice
