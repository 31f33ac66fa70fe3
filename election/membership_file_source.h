// Feeds a MembershipIndex from the --pool-membership-file (YAML or JSON,
// `{pools: {<pool>: [<node>, ...]}}`), re-reading it when it changes.
#pragma once

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "election/membership.h"

namespace poolcoord::election {

// Polls the file's identity (device, inode, size, mtime in ns) every
// `poll_interval`, so both in-place edits and atomic rename-replace (what
// ConfigMap volume updates and `mv` do) are seen. A file that fails to read or
// parse keeps the last good membership; the reason is logged once per
// change of the file. Content is delivered to the index as source "file".
//
// Thread-safety: Start and Stop from one owning thread; the index is read
// concurrently by everyone else.
class MembershipFileSource {
 public:
  // `index` is not owned and must outlive this object.
  MembershipFileSource(std::string path, MembershipIndex* index,
                       absl::Duration poll_interval = absl::Seconds(1));
  ~MembershipFileSource();
  MembershipFileSource(const MembershipFileSource&) = delete;
  MembershipFileSource& operator=(const MembershipFileSource&) = delete;

  // Loads the file synchronously, then starts watching it. Errors (the file left
  // unwatched): NotFound / FailedPrecondition when unreadable, InvalidArgument when
  // malformed, each naming the path.
  absl::Status Start();
  // Stops the watcher thread; idempotent.
  void Stop();

  // Reads and applies the file now if it changed since the last attempt. Returns
  // the outcome of that attempt (OK when unchanged). Exposed for tests; never during a poll
  // of the watcher thread (a long poll_interval keeps it idle).
  absl::Status PollOnce();

  // The outcome of the latest attempt to load the file (Start, or a poll that saw
  // it change): OK, or why it was not applied (NotFound, FailedPrecondition,
  // InvalidArgument, as Start returns). Any thread.
  absl::Status LastLoadStatus() const;

 private:
  struct FileId {
    bool exists = false;
    unsigned long long dev = 0, ino = 0;
    long long size = 0, mtime_ns = 0;
    bool operator==(const FileId&) const = default;
  };
  FileId Stat() const;
  absl::Status Load(const FileId& id);  // LoadFile, and records its outcome
  absl::Status LoadFile(const FileId& id);
  void Run();

  const std::string path_;
  MembershipIndex* const index_;
  const absl::Duration poll_interval_;
  FileId last_attempt_;  // touched by Start/PollOnce; the thread owns it once started
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace poolcoord::election
