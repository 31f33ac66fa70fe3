// Child processes of the simulator and the test fixtures (a server, an etcd): a
// program started with its output in a log file and tied to its parent's life,
// and a free port on the loopback interface to give it.
//
// Linux only (prctl). Thread-safe; SpawnWithLog forks, so call it before the
// calling process starts threads that hold locks a child could need (the child
// only execs).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace poolcoord::base {

// Starts the program at path argv[0] with arguments `argv`, its stdout and
// stderr written to `log_path` (truncated; the child runs without them when
// the file cannot be opened), and `death_signal` sent to it when this process
// dies (PR_SET_PDEATHSIG: a crashed test leaves no etcd behind). Returns the
// child's pid (the caller waits for it); InternalError when fork fails. A
// program that cannot be executed exits with status 127.
absl::StatusOr<pid_t> SpawnWithLog(std::vector<std::string> argv, const std::string& log_path,
                                   int death_signal);

// A TCP port on 127.0.0.1 the kernel just handed out, for a child to bind a
// moment later (a small race: the usual price of a free-port search).
// InternalError when no socket can be bound.
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace poolcoord::base
