// poolcoord-apiserver: the aggregated API server for coordination.pool.
// Exit status: 0 after a clean SIGTERM/SIGINT shutdown or --help; 2 for bad
// flags; 1 when start-up fails (certificates, files, bind). SIGHUP re-reads the
// certificate files. With --cleanup it serves nothing: apiservice/cleanup.h.
#include <malloc.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "apiservice/cleanup.h"
#include "apiservice/flags.h"
#include "base/log.h"
#include "apiservice/server.h"

int main(int argc, char** argv) {
  using poolcoord::apiservice::ApiServer;
  using poolcoord::base::LogError;
  using poolcoord::base::LogInfo;

  // glibc gives threads arenas of their own; with many threads (once a thread per
  // watch stream, still one per etcd3 watch) the resident set grew to 1.7x the
  // live heap in the memory benchmark. Two arenas keep it near the heap for a
  // server whose work runs on two I/O threads.
  mallopt(M_ARENA_MAX, 2);
  // Keep blocks of 128 KiB and more in mmap, as glibc starts out: by default the
  // first such block freed raises the threshold (up to 32 MiB, the trim threshold
  // to twice that), after which large transient buffers (list results, a GC
  // sweep's snapshot, encoded LIST bodies) stay in the heap as resident free
  // memory. Memory benchmark, four paired runs: RSS with 110,000 objects
  // 117.1-118.1 MB against 120.7-121.2 MB.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  // Debian's Abseil is built without NDEBUG, so its absl::Mutex checks lock
  // order on every Lock: the thread's held locks and one process-wide graph
  // under one spin lock, 76 -> 211 ns per lock and unlock on this 2-core machine.
  // A release build of Abseil leaves it off; so does the server (the unit tests
  // keep it). A watch event to 1,000 watchers takes some 10,000 locks.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<poolcoord::apiservice::ServerOptions> options =
      poolcoord::apiservice::ParseFlags(args);
  if (!options.ok()) {
    std::fprintf(stderr, "Error: %s\nRun '%s --help' for usage.\n",
                 std::string(options.status().message()).c_str(), argv[0]);
    return 2;
  }
  if (options->help) {
    std::fputs(poolcoord::apiservice::FlagUsage("poolcoord-apiserver").c_str(), stdout);
    return 0;
  }
  if (options->cleanup) return poolcoord::apiservice::RunCleanup(*options);
  if (options->storage_backend == "etcd3" && options->etcd_servers.empty()) {
    std::fprintf(stderr, "Error: --storage-backend=etcd3 needs --etcd-servers\n");
    return 2;
  }

  // Signals are taken synchronously by this thread; every thread started from
  // here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  try {
    absl::StatusOr<std::unique_ptr<ApiServer>> server = ApiServer::Start(*options);
    if (!server.ok()) {
      LogError("start-up failed: ", server.status().message());
      return 1;
    }
    // Start-up garbage: the membership file's text and parsed PoolMap (freed
    // just after the file source's own malloc_trim) and the membership snapshot
    // logged at start. With 100,000 nodes they left ~21 MB of free but resident
    // pages in the main heap: RSS at start 42.5 MiB, 21.6 MiB with this trim. The
    // I/O threads do not always allocate from that heap, so the RSS with 110,000
    // objects drops too, by 1-4 MB over four paired runs.
    malloc_trim(0);
    const std::string& kubeconfig = (*server)->kubeconfig_path();
    std::printf("poolcoord-apiserver listening on %s; admin kubeconfig: %s\n",
                (*server)->url().c_str(),
                !kubeconfig.empty()                 ? kubeconfig.c_str()
                : options->write_kubeconfig.empty() ? "(none: --write-kubeconfig is empty)"
                                                    : "(none: certificates were given)");
    std::fflush(stdout);

    int received = 0;
    // SIGHUP re-reads the certificate files at once (they are followed anyway).
    while (sigwait(&signals, &received) == 0 && received == SIGHUP) {
      LogInfo("received SIGHUP: re-reading the certificate files");
      (*server)->ReloadCertificates();
    }
    LogInfo("received ", received == SIGTERM ? "SIGTERM" : "SIGINT",
            ": stopping; finishing in-flight requests");
    (*server)->Shutdown(std::chrono::seconds(30));
    server->reset();
    LogInfo("stopped");
    return 0;
  } catch (const std::exception& e) {
    LogError("fatal: ", e.what());
    return 1;
  }
}
