#include "election/membership_file_source.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace poolcoord::election {

namespace {
constexpr char kSource[] = "file";
}  // namespace

MembershipFileSource::MembershipFileSource(std::string path, MembershipIndex* index,
                                           absl::Duration poll_interval)
    : path_(std::move(path)), index_(index), poll_interval_(poll_interval) {}

MembershipFileSource::~MembershipFileSource() { Stop(); }

MembershipFileSource::FileId MembershipFileSource::Stat() const {
  FileId id;
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) return id;
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = st.st_size;
  id.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec;
  return id;
}

absl::Status MembershipFileSource::Load(const FileId& id) {
  absl::Status status = LoadFile(id);
  absl::MutexLock lock(&mu_);
  last_status_ = status;
  return status;
}

absl::Status MembershipFileSource::LastLoadStatus() const {
  absl::MutexLock lock(&mu_);
  return last_status_;
}

absl::Status MembershipFileSource::LoadFile(const FileId& id) {
  last_attempt_ = id;
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string why = absl::StrCat("membership file ", path_, ": cannot open: ",
                                         std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(why) : absl::FailedPreconditionError(why);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::FailedPreconditionError(absl::StrCat("membership file ", path_, ": read error"));
  }
  auto pools = ParseMembershipYaml(text.str());
  if (!pools.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("membership file ", path_, ": ", pools.status().message()));
  }
  // Parsing already rejects a node in two pools within the file; a conflict here
  // comes from another source and is worth a log line, not a rejection.
  absl::Status merged = index_->Replace(kSource, *pools);
  if (!merged.ok()) base::LogWarning("membership: ", merged.message());
#ifdef __GLIBC__
  // The YAML tree of a 100,000-node file is gone now; hand its pages back (the
  // memory benchmark saw ~75 MiB kept after the load otherwise).
  malloc_trim(0);
#endif
  return absl::OkStatus();
}

absl::Status MembershipFileSource::Start() {
  absl::Status status = Load(Stat());
  if (!status.ok()) return status;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void MembershipFileSource::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status MembershipFileSource::PollOnce() {
  const FileId id = Stat();
  if (id == last_attempt_) return absl::OkStatus();
  if (!id.exists) {
    // Mid rename-replace, or deleted: keep serving what we have.
    last_attempt_ = id;
    base::LogWarning("membership file ", path_, " is missing; keeping the last good membership");
    absl::Status missing = absl::NotFoundError(absl::StrCat("membership file ", path_, " is missing"));
    absl::MutexLock lock(&mu_);
    last_status_ = missing;
    return missing;
  }
  absl::Status status = Load(id);
  if (!status.ok()) {
    base::LogWarning(status.message(), "; keeping the last good membership");
  } else {
    base::LogInfo("membership file ", path_, " reloaded");
  }
  return status;
}

void MembershipFileSource::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), poll_interval_);
    if (stopping_) break;
    mu_.Unlock();
    PollOnce().IgnoreError();
    mu_.Lock();
  }
}

}  // namespace poolcoord::election
