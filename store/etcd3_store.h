// The etcd3 Store (docs/architecture.md "Stores"): the Store interface over etcd's
// v3 API, reached through etcd's v3 JSON gateway (store/etcd3_client.h; why the
// gateway and not gRPC: docs/etcd3.md).
//
// Layout, as kube-apiserver's etcd3 storage: one key per object,
// `<prefix>/<plural>/<name>` ("/registry/coordination.pool/widgets/w1"); the
// value is store/object_codec.h's EncodeForStorage. Several processes
// (replicas) may share one etcd and one prefix.
//
// Revisions are etcd's: an object's resourceVersion is its key's mod_revision,
// CurrentRevision is the header revision of a fresh (linearizable) read, a
// List reports its range's header revision.
//
// GetAll(keys) is one etcd transaction holding a range request per key and no
// compares: one round trip and one linearizable read (etcd's ReadIndex) for
// all keys, at one revision. At most 128 keys (etcd's default --max-txn-ops):
// more are InvalidArgument. Concurrent calls share transactions (as
// kube-apiserver batches its consistent reads' revision checks): calls that
// arrive while one is in flight go together in the next, sent once that one
// returns; a call never joins one already sent, so each still reads every
// write acknowledged before it began.
//
// Update(kind, name, fn) reads the key and every key fn reads through the
// TxnReader (all at one revision), runs fn, then commits one etcd transaction
// that compares each read key's mod_revision (create_revision == 0 for a key
// read as absent) and puts or deletes the key. When another writer got there
// first the comparison fails and the whole read-fn-commit loop runs again with
// fresh data, at most 20 times, then Aborted (ConflictError). fn therefore may
// run more than once and must not have side effects outside its result.
//
// Watch(kind, rev) is an etcd watch from rev + 1 with prev_kv. A start revision
// that etcd compacted away gets ExpiredError from Watch (or, when the
// compaction races the call, a kError event that closes the watcher); a future
// one TimeoutError(rv_too_large). Each watcher runs one thread reading the
// stream and a bounded queue (a consumer `watcher_queue_limit` events behind is
// closed with a kError event, as the memory store does).
//
// Object::observed_monotonic_us (the server's time of the last renewal) is
// per-process: the store stamps each renewal of a key (a new RenewalTime,
// store/object.h, which the lease rules stamp on every renewal) with this
// process's monotonic time when it first sees it, and its own writes with the
// value fn set. A renewal made through another replica thus counts from when
// this replica first saw it, never earlier, so no replica expires a lease early
// (client-go's LeaderElector judges its observed record the same way); a later
// write that renews nothing (a status write: the expired mark, a delegation
// challenge) keeps that first sight, so it does not move the expiry either.
//
// Thread-safety: every method may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace poolcoord::store {

struct Etcd3StoreOptions {
  // --etcd-servers: "http://127.0.0.1:2379", ... (no scheme: https:// when TLS
  // files are set, else http://). Calls fail over between them.
  std::vector<std::string> endpoints;
  // --etcd-prefix; keys are <prefix>/<plural>/<name>.
  std::string prefix = "/registry/coordination.pool";
  // TLS to etcd, kube-apiserver's --etcd-cafile, --etcd-certfile,
  // --etcd-keyfile.
  std::string ca_file, cert_file, key_file;
  // Whole-call timeout of each etcd request.
  std::chrono::milliseconds request_timeout{10'000};
  // Events a watcher may have pending before it is closed as too slow.
  size_t watcher_queue_limit = 10000;
  // Keys per range request while List pages through a kind with a predicate.
  int64_t list_page_size = 500;
  // The monotonic clock (microseconds) stamped into observed_monotonic_us; must
  // be the one the lease rules judge expiry with. Default: std::steady_clock,
  // as base::RealClock::MonotonicMicros.
  std::function<int64_t()> monotonic_micros;
};

// Connects and checks that etcd answers. Errors: InvalidArgument (no endpoint,
// empty prefix), Unavailable naming the endpoints when none answers.
absl::StatusOr<std::unique_ptr<Store>> NewEtcd3Store(const Etcd3StoreOptions& options);

}  // namespace poolcoord::store
