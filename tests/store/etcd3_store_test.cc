#define BOOST_TEST_MODULE etcd3_store
#include "store/etcd3_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "rapidjson/document.h"
#include "store/api_error.h"
#include "store/etcd3_client.h"
#include "tests/store/etcd_fixture.h"
#include "tests/store/watch_testing.h"

namespace poolcoord::store {
namespace {

using std::chrono::milliseconds;

// One etcd for the whole module (started on first use, killed at exit); each
// test works under its own key prefix.
testing::EtcdFixture& Etcd() {
  static testing::EtcdFixture etcd;
  return etcd;
}

std::string UniquePrefix() {
  static std::atomic<int> n{0};
  return "/test/" + std::to_string(getpid()) + "-" + std::to_string(n++) + "/registry";
}

std::unique_ptr<Store> NewStore(const std::string& prefix, Etcd3StoreOptions options = {}) {
  options.endpoints = {Etcd().endpoint()};
  options.prefix = prefix;
  auto store = NewEtcd3Store(options);
  BOOST_REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return *std::move(store);
}

// Two stores on one key prefix: two replicas of the server on one etcd.
struct TwoReplicas {
  std::string prefix = UniquePrefix();
  std::unique_ptr<Store> a = NewStore(prefix);
  std::unique_ptr<Store> b = NewStore(prefix);
};

// The same, each store on a monotonic clock of its own (a at 1 ms, b at 50 ms),
// as two processes are; the test moves them.
struct TwoClockedReplicas {
  static Etcd3StoreOptions On(std::atomic<int64_t>* clock) {
    Etcd3StoreOptions o;
    o.monotonic_micros = [clock] { return clock->load(); };
    return o;
  }
  std::string prefix = UniquePrefix();
  std::atomic<int64_t> clock_a{1'000}, clock_b{50'000};
  std::unique_ptr<Store> a = NewStore(prefix, On(&clock_a));
  std::unique_ptr<Store> b = NewStore(prefix, On(&clock_b));
};

// A raw gateway call, to look at etcd without the store under test.
rapidjson::Document EtcdCall(const std::string& path, const std::string& body) {
  Etcd3ClientOptions config;
  config.endpoints = {Etcd().endpoint()};
  auto client = Etcd3Client::New(config);
  BOOST_REQUIRE(client.ok());
  auto answer = (*client)->Call(path, body, /*idempotent=*/true);
  BOOST_REQUIRE_MESSAGE(answer.ok(), answer.status().ToString());
  return *std::move(answer);
}

int64_t ModRevisionInEtcd(const std::string& key) {
  auto doc = EtcdCall("/v3/kv/range", "{\"key\":\"" + absl::Base64Escape(key) + "\"}");
  if (!doc.HasMember("kvs")) return 0;
  return std::stoll(doc["kvs"][0]["mod_revision"].GetString());
}

void Compact(int64_t revision) {
  EtcdCall("/v3/kv/compaction",
           "{\"revision\":\"" + std::to_string(revision) + "\",\"physical\":true}");
}

MutableObjectPtr NewLease(Kind kind, const std::string& holder) {
  auto o = std::make_shared<Object>();
  o->kind = kind;
  o->spec.holder_identity = holder;
  o->spec.lease_duration_seconds = 10;
  return o;
}

// Creates when absent, otherwise sets the holder.
UpdateFn Put(Kind kind, const std::string& holder) {
  return [kind, holder](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
    auto next = cur ? std::make_shared<Object>(*cur) : NewLease(kind, holder);
    next->spec.holder_identity = holder;
    return next;
  };
}

UpdateFn Remove() {
  return [](const ObjectPtr&, TxnReader&) -> absl::StatusOr<MutableObjectPtr> { return nullptr; };
}

// Adds one to leaseTransitions (creating the object at 1).
UpdateFn Increment() {
  return [](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
    auto next = cur ? std::make_shared<Object>(*cur) : NewLease(Kind::kPoolLease, "h");
    next->spec.lease_transitions = next->spec.lease_transitions.value_or(0) + 1;
    return next;
  };
}

int64_t Write(Store& store, Kind kind, const std::string& name, const std::string& holder) {
  auto r = store.Update(kind, name, Put(kind, holder));
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return r->object->metadata.resource_version;
}

std::vector<EventPtr> Drain(Watcher& w, size_t n, milliseconds each = milliseconds(3000)) {
  std::vector<EventPtr> out;
  while (out.size() < n) {
    EventPtr e = w.Next(each);
    if (!e) break;
    out.push_back(e);
  }
  return out;
}

int64_t ElapsedMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - since).count();
}

BOOST_AUTO_TEST_SUITE(Connect)

BOOST_AUTO_TEST_CASE(UnreachableEtcdIsUnavailableNamingTheEndpoint) {
  Etcd3StoreOptions options;
  options.endpoints = {"http://127.0.0.1:1"};
  auto store = NewEtcd3Store(options);
  BOOST_REQUIRE(!store.ok());
  BOOST_TEST(absl::IsUnavailable(store.status()));
  BOOST_TEST(std::string(store.status().message()).find("http://127.0.0.1:1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(FailsOverToTheNextEndpoint) {
  Etcd3StoreOptions options;
  options.endpoints = {"http://127.0.0.1:1", Etcd().endpoint()};
  options.prefix = UniquePrefix();
  auto store = NewEtcd3Store(options);
  BOOST_REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  BOOST_TEST(Write(**store, Kind::kPoolLease, "p", "n1") > 0);
}

// An etcd member cut off from its peers, as its JSON gateway answers on
// 127.0.0.1:<free port> (plain HTTP): every call gets etcd 3.4.23's answer
// `answer` (recorded from a member in a network namespace whose peer traffic
// was dropped), and the server counts the calls and those that carried the
// hasleader metadata.
class LeaderlessMember {
 public:
  // etcd's answer to a call with hasleader once the member has lost its leader.
  static constexpr const char* kNoLeader =
      R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})";
  // Its answer, 7 s later, to a read that waited for a leader.
  static constexpr const char* kTimedOut =
      R"({"error":"etcdserver: request timed out","message":"etcdserver: request timed out","code":14})";

  explicit LeaderlessMember(std::string answer) : answer_(std::move(answer)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    BOOST_REQUIRE(listen(fd_, 16) == 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LeaderlessMember() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int calls() const { return calls_.load(); }
  int with_hasleader() const { return with_hasleader_.load(); }

 private:
  // One connection at a time; each request is answered and the connection
  // closed, so the client never keeps one.
  void Serve() {
    for (int c; (c = accept(fd_, nullptr, nullptr)) >= 0; close(c)) {
      std::string in;
      char buf[4096];
      size_t head_end;
      while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      if (head_end == std::string::npos) continue;
      std::string head = in.substr(0, head_end);
      for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      // The body too: a close with unread data would reset the connection.
      const size_t at = head.find("\r\ncontent-length:");
      const size_t length = at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 17, nullptr, 10);
      while (in.size() < head_end + 4 + length) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      ++calls_;
      if (head.find("\r\ngrpc-metadata-hasleader: true") != std::string::npos) ++with_hasleader_;
      const std::string out = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                              "Connection: close\r\nContent-Length: " +
                              std::to_string(answer_.size()) + "\r\n\r\n" + answer_;
      (void)!write(c, out.data(), out.size());
    }
  }

  const std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> calls_{0}, with_hasleader_{0};
  std::thread thread_;
};

// A member without a leader (cut off from its peers) answers every call that
// requires a leader at once with "no leader", and every call requires one:
// the store goes on to the next member and stays there. Before, the calls went
// without hasleader, a read waited 7 s for etcd's "request timed out", the
// answer pinned the store to that member, and a watch there stayed open and
// silent for the whole partition (robustness suite, partition-etcd-member:
// every replica's watchers got nothing until the partition healed).
BOOST_AUTO_TEST_CASE(PassesOverAMemberWithoutLeader) {
  LeaderlessMember cut_off(LeaderlessMember::kNoLeader);
  Etcd3StoreOptions options;
  options.endpoints = {cut_off.endpoint(), Etcd().endpoint()};
  options.prefix = UniquePrefix();
  auto store = NewEtcd3Store(options);
  BOOST_REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  auto watcher = (*store)->Watch(Kind::kPoolLease, 0);
  BOOST_REQUIRE_MESSAGE(watcher.ok(), watcher.status().ToString());
  const int64_t rv = Write(**store, Kind::kPoolLease, "p", "n1");
  EventPtr e = (*watcher)->Next(milliseconds(5000));
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST(e->revision == rv);
  BOOST_TEST(cut_off.calls() == 1);  // asked once, then passed over
  BOOST_TEST(cut_off.with_hasleader() == 1);
}

// "No leader" is given before the call runs, so a txn goes on too; a txn that
// waited for a leader and timed out may have been applied and does not.
BOOST_AUTO_TEST_CASE(OnlyANoLeaderTxnGoesOnToTheNextMember) {
  const std::string txn =
      R"({"compare":[],"success":[{"request_put":{"key":")" + absl::Base64Escape(UniquePrefix()) +
      R"(","value":"eA=="}}]})";
  for (const char* answer : {LeaderlessMember::kNoLeader, LeaderlessMember::kTimedOut}) {
    LeaderlessMember cut_off(answer);
    Etcd3ClientOptions options;
    options.endpoints = {cut_off.endpoint(), Etcd().endpoint()};
    auto client = Etcd3Client::New(options);
    BOOST_REQUIRE(client.ok());
    auto put = (*client)->Call("/v3/kv/txn", txn, /*idempotent=*/false);
    const bool no_leader = answer == LeaderlessMember::kNoLeader;
    BOOST_TEST_INFO(answer);
    BOOST_TEST(put.ok() == no_leader);
    if (!no_leader) {
      BOOST_TEST(absl::IsUnavailable(put.status()));
      BOOST_TEST(std::string(put.status().message()).find("request timed out") != std::string::npos);
    }
    // A read goes on either way.
    LeaderlessMember again(answer);
    (*client).reset();
    options.endpoints = {again.endpoint(), Etcd().endpoint()};
    client = Etcd3Client::New(options);
    BOOST_REQUIRE(client.ok());
    auto read = (*client)->Call("/v3/kv/range", R"({"key":"AA=="})", /*idempotent=*/true);
    BOOST_TEST(read.ok(), read.status());
  }
}

// A member this replica is cut off from: its connections complete (the
// kernel's backlog; nothing accepts them) and nothing ever answers, as a
// partition that drops packets after the connection was made looks.
struct SilentMember {
  SilentMember() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    BOOST_REQUIRE(listen(fd, 16) == 0);
  }
  ~SilentMember() { close(fd); }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port); }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
};

// With every member silent a call fails once the timeout is spent, whatever
// the number of members: one budget for the call. Before, each member had the
// whole timeout (a replica cut off from three members answered a read after
// 15-20 s, a write after up to 45, in the robustness suite's partition-replica).
BOOST_AUTO_TEST_CASE(OneTimeoutForTheWholeCall) {
  SilentMember a, b, c;
  Etcd3ClientOptions options;
  options.endpoints = {a.endpoint(), b.endpoint(), c.endpoint()};
  options.timeout = milliseconds(600);
  auto client = Etcd3Client::New(options);
  BOOST_REQUIRE(client.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto read = (*client)->Call("/v3/kv/range", R"({"key":"AA=="})", /*idempotent=*/true);
  const int64_t took = ElapsedMs(t0);
  BOOST_TEST(absl::IsUnavailable(read.status()), read.status());
  BOOST_TEST(took >= 500);
  BOOST_TEST(took < 1200, "the call took " << took << " ms, three members' timeouts would be 1800");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Crud)

BOOST_AUTO_TEST_CASE(ResourceVersionIsTheModRevision) {
  const std::string prefix = UniquePrefix();
  auto store = NewStore(prefix);
  const std::string key = prefix + "/poolleases/pool-a";

  auto created = store->Update(Kind::kPoolLease, "pool-a", Put(Kind::kPoolLease, "n1"));
  BOOST_REQUIRE(created.ok());
  BOOST_TEST(created->created);
  const int64_t rv1 = created->object->metadata.resource_version;
  BOOST_TEST(rv1 == ModRevisionInEtcd(key));
  BOOST_TEST(store->CurrentRevision() == rv1);

  auto got = store->Get(Kind::kPoolLease, "pool-a");
  BOOST_REQUIRE(got.ok());
  BOOST_TEST((*got)->metadata.resource_version == rv1);
  BOOST_TEST((*got)->metadata.name == "pool-a");
  BOOST_TEST(*(*got)->spec.holder_identity == "n1");

  auto updated = store->Update(Kind::kPoolLease, "pool-a", Put(Kind::kPoolLease, "n2"));
  BOOST_REQUIRE(updated.ok());
  BOOST_TEST(!updated->created);
  const int64_t rv2 = updated->object->metadata.resource_version;
  BOOST_TEST(rv2 > rv1);
  BOOST_TEST(rv2 == ModRevisionInEtcd(key));
  BOOST_TEST(*(*store->Get(Kind::kPoolLease, "pool-a"))->spec.holder_identity == "n2");

  // The same name of the other kind is another key.
  BOOST_TEST(absl::IsNotFound(store->Get(Kind::kDelegatedLease, "pool-a").status()));

  auto deleted = store->Update(Kind::kPoolLease, "pool-a", Remove());
  BOOST_REQUIRE(deleted.ok());
  BOOST_TEST(deleted->deleted);
  BOOST_TEST(deleted->object->metadata.resource_version > rv2);
  BOOST_TEST(deleted->object->metadata.resource_version == store->CurrentRevision());
  BOOST_TEST(*deleted->object->spec.holder_identity == "n2");
  BOOST_TEST(ModRevisionInEtcd(key) == 0);
  BOOST_TEST(absl::IsNotFound(store->Get(Kind::kPoolLease, "pool-a").status()));

  // Deleting an absent key changes nothing.
  const int64_t before = store->CurrentRevision();
  auto again = store->Update(Kind::kPoolLease, "pool-a", Remove());
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(!again->deleted);
  BOOST_TEST(store->CurrentRevision() == before);
}

BOOST_AUTO_TEST_CASE(FnErrorIsReturnedAndNothingWritten) {
  auto store = NewStore(UniquePrefix());
  const int64_t before = store->CurrentRevision();
  auto r = store->Update(Kind::kPoolLease, "p",
                         [](const ObjectPtr&, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
                           return ForbiddenError("no");
                         });
  BOOST_TEST(absl::IsPermissionDenied(r.status()));
  BOOST_TEST(store->CurrentRevision() == before);
}

BOOST_AUTO_TEST_CASE(DryRunWritesNothing) {
  auto store = NewStore(UniquePrefix());
  const int64_t before = store->CurrentRevision();
  auto r = store->Update(Kind::kPoolLease, "p", Put(Kind::kPoolLease, "n1"),
                         /*dry_run=*/true);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->created);
  BOOST_TEST(*r->object->spec.holder_identity == "n1");
  BOOST_TEST(store->CurrentRevision() == before);
  BOOST_TEST(absl::IsNotFound(store->Get(Kind::kPoolLease, "p").status()));

  const int64_t rv = Write(*store, Kind::kPoolLease, "p", "n1");
  auto u = store->Update(Kind::kPoolLease, "p", Put(Kind::kPoolLease, "n2"), true);
  BOOST_REQUIRE(u.ok());
  BOOST_TEST(u->object->metadata.resource_version == rv);
  auto d = store->Update(Kind::kPoolLease, "p", Remove(), true);
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(d->deleted);
  BOOST_TEST(store->CurrentRevision() == rv);
  BOOST_TEST(*(*store->Get(Kind::kPoolLease, "p"))->spec.holder_identity == "n1");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ConsistentMultiKeyReads)

std::vector<ObjectPtr> ReadBoth(Store& store, const std::string& pool, const std::string& node) {
  const ObjectKey keys[] = {{Kind::kPoolLease, pool}, {Kind::kDelegatedLease, node}};
  auto read = store.GetAll(keys);
  BOOST_REQUIRE_MESSAGE(read.ok(), read.status().ToString());
  BOOST_REQUIRE(read->size() == 2u);
  return *std::move(read);
}

// What the webhook relies on: a delete or a replacement that etcd acknowledged
// through another replica is what the next read of this one sees, at once.
BOOST_FIXTURE_TEST_CASE(SeesWhatAnotherReplicaWroteBeforeTheCall, TwoReplicas) {
  const int64_t pool_rv = Write(*a, Kind::kPoolLease, "hangzhou", "hz-1");
  const int64_t dl_rv = Write(*a, Kind::kDelegatedLease, "hz-3", "hz-1");
  auto both = ReadBoth(*b, "hangzhou", "hz-3");
  BOOST_REQUIRE(both[0] && both[1]);
  BOOST_TEST(both[0]->metadata.resource_version == pool_rv);
  BOOST_TEST(both[0]->metadata.name == "hangzhou");
  BOOST_TEST((both[0]->kind == Kind::kPoolLease));
  BOOST_TEST(both[1]->metadata.resource_version == dl_rv);
  BOOST_TEST(*both[1]->spec.holder_identity == "hz-1");

  BOOST_REQUIRE(a->Update(Kind::kDelegatedLease, "hz-3", Remove()).ok());
  both = ReadBoth(*b, "hangzhou", "hz-3");
  BOOST_TEST(both[0] != nullptr);
  BOOST_TEST(both[1] == nullptr);

  // Replaced: deleted and created again by another holder.
  BOOST_REQUIRE(a->Update(Kind::kPoolLease, "hangzhou", Remove()).ok());
  const int64_t replaced_rv = Write(*a, Kind::kPoolLease, "hangzhou", "hz-2");
  const int64_t redelegated_rv = Write(*a, Kind::kDelegatedLease, "hz-3", "hz-2");
  both = ReadBoth(*b, "hangzhou", "hz-3");
  BOOST_REQUIRE(both[0] && both[1]);
  BOOST_TEST(both[0]->metadata.resource_version == replaced_rv);
  BOOST_TEST(*both[0]->spec.holder_identity == "hz-2");
  BOOST_TEST(both[1]->metadata.resource_version == redelegated_rv);
  BOOST_TEST(*both[1]->spec.holder_identity == "hz-2");
}

// All keys at one revision: a writer adds one to K0, K1, ..., K7 in turn, round
// after round, while the other replica reads all eight, K7 first. In any one
// revision the values never rise along K0..K7 and differ by at most one. Reads
// one key after another, in that order, break it whenever the writer finishes a
// round and starts the next during the read (K7 read before, K0 after).
BOOST_FIXTURE_TEST_CASE(AllKeysAtOneRevision, TwoReplicas) {
  constexpr int kKeys = 8, kRounds = 40;
  std::vector<std::string> names;
  for (int i = 0; i < kKeys; ++i) names.push_back("K" + std::to_string(i));
  std::atomic<bool> done{false};
  // Boost.Test's assertions are not thread-safe: the writer records its first
  // failure for the main thread to check after the join.
  absl::Status write_error;
  std::thread writer([&] {
    for (int r = 0; r < kRounds && write_error.ok(); ++r) {
      for (const auto& n : names) {
        if (auto w = a->Update(Kind::kPoolLease, n, Increment()); !w.ok()) {
          write_error = w.status();
          break;
        }
      }
    }
    done = true;
  });
  std::vector<ObjectKey> keys;
  for (int i = kKeys - 1; i >= 0; --i) keys.push_back({Kind::kPoolLease, names[i]});
  int reads = 0, torn = 0;
  absl::Status read_error;
  while (!done.load()) {
    auto read = b->GetAll(keys);
    if (!read.ok()) {
      read_error = read.status();  // asserted after the writer's join
      break;
    }
    std::vector<int32_t> v(kKeys);  // by write order: v[i] is Ki
    for (int i = 0; i < kKeys; ++i) {
      const ObjectPtr& o = (*read)[kKeys - 1 - i];
      v[i] = o ? o->spec.lease_transitions.value_or(0) : 0;
    }
    bool ok = v.front() - v.back() <= 1;
    for (int i = 1; i < kKeys; ++i) ok = ok && v[i] <= v[i - 1];
    if (!ok) {
      ++torn;
      BOOST_TEST_MESSAGE("torn read: K0 " << v.front() << ", K7 " << v.back());
    }
    ++reads;
  }
  writer.join();
  BOOST_REQUIRE_MESSAGE(write_error.ok(), write_error.ToString());
  BOOST_REQUIRE_MESSAGE(read_error.ok(), read_error.ToString());
  BOOST_TEST(reads > 0);
  BOOST_TEST(torn == 0, torn << " of " << reads << " reads mixed revisions");
}

// Transactions etcd has run (gRPC KV/Txn, every code), from its /metrics.
int64_t EtcdTxns() {
  const std::string body = testing::EtcdMetricsText(Etcd().endpoint());
  int64_t total = 0;
  size_t at = 0;
  while ((at = body.find("\ngrpc_server_handled_total{", at)) != std::string::npos) {
    const size_t end = body.find('\n', at + 1);
    const std::string line = body.substr(at + 1, end - at - 1);
    at = end;
    if (line.find("grpc_method=\"Txn\"") == std::string::npos) continue;
    total += static_cast<int64_t>(std::stod(line.substr(line.rfind(' ') + 1)));
  }
  return total;
}

// Readers on six threads share transactions, and each still sees every write
// acknowledged before its call began: the writer publishes each value once
// its Update has returned, a reader notes the published value before it
// reads, and the value read must be no older.
BOOST_FIXTURE_TEST_CASE(ConcurrentReadsShareTransactionsAndStayFresh, TwoReplicas) {
  constexpr int kReaders = 6, kWrites = 60;
  std::atomic<int32_t> acked{0};
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, stale{0};
  const int64_t txns_before = EtcdTxns();
  absl::Status write_error;  // asserted after the join (Boost.Test is not thread-safe)
  std::thread writer([&] {
    for (int i = 0; i < kWrites; ++i) {
      auto w = a->Update(Kind::kPoolLease, "C", Increment());
      if (!w.ok()) {
        write_error = w.status();
        break;
      }
      acked = *w->object->spec.lease_transitions;
    }
    done = true;
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      const std::string mine = "other-" + std::to_string(t);
      const ObjectKey keys[] = {{Kind::kDelegatedLease, mine}, {Kind::kPoolLease, "C"}};
      while (!done.load()) {
        const int32_t before = acked.load();
        auto read = b->GetAll(keys);
        if (!read.ok() || read->size() != 2 || (*read)[0] != nullptr) {
          ++stale;
          continue;
        }
        const int32_t seen = (*read)[1] ? (*read)[1]->spec.lease_transitions.value_or(0) : 0;
        if (seen < before) ++stale;
        ++reads;
      }
    });
  }
  writer.join();
  for (auto& r : readers) r.join();
  BOOST_REQUIRE_MESSAGE(write_error.ok(), write_error.ToString());
  const int64_t read_txns = EtcdTxns() - txns_before - kWrites;  // each write commits one txn
  BOOST_TEST(stale.load() == 0);
  BOOST_TEST(reads.load() > kReaders);
  BOOST_TEST(read_txns < reads.load(),
             reads.load() << " reads took " << read_txns << " transactions");
  BOOST_TEST_MESSAGE(reads.load() << " reads in " << read_txns << " transactions");
}

BOOST_AUTO_TEST_CASE(AbsentKeysEmptyAndTooManyKeys) {
  auto store = NewStore(UniquePrefix());
  const int64_t rv = Write(*store, Kind::kDelegatedLease, "n1", "leader");
  const ObjectKey keys[] = {{Kind::kPoolLease, "n1"},  // the other kind's key of that name
                            {Kind::kDelegatedLease, "n1"},
                            {Kind::kDelegatedLease, "n2"}};
  auto read = store->GetAll(keys);
  BOOST_REQUIRE_MESSAGE(read.ok(), read.status().ToString());
  BOOST_REQUIRE(read->size() == 3u);
  BOOST_TEST((*read)[0] == nullptr);
  BOOST_REQUIRE((*read)[1] != nullptr);
  BOOST_TEST((*read)[1]->metadata.resource_version == rv);
  BOOST_TEST((*read)[2] == nullptr);

  auto none = store->GetAll({});
  BOOST_REQUIRE(none.ok());
  BOOST_TEST(none->empty());

  std::vector<std::string> names;
  for (int i = 0; i < 129; ++i) names.push_back("n" + std::to_string(i));
  std::vector<ObjectKey> many;
  for (const auto& n : names) many.push_back({Kind::kDelegatedLease, n});
  auto too_many = store->GetAll(many);
  BOOST_TEST(absl::IsInvalidArgument(too_many.status()), too_many.status());
  many.pop_back();
  auto most = store->GetAll(many);
  BOOST_REQUIRE_MESSAGE(most.ok(), most.status().ToString());
  BOOST_TEST(most->size() == 128u);
  BOOST_TEST((*most)[1] != nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Atomicity)

// N threads on each of two stores (two replicas on one etcd) add one each time:
// every acknowledged update is in the final count, none twice.
BOOST_FIXTURE_TEST_CASE(NoLostUpdateAcrossTwoStores, TwoReplicas) {
  constexpr int kThreadsPerStore = 3;
  constexpr int kEach = 12;
  std::atomic<int> ok{0};
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (Store* s : {a.get(), b.get()}) {
    for (int t = 0; t < kThreadsPerStore; ++t) {
      threads.emplace_back([s, &ok, &conflicts] {
        for (int i = 0; i < kEach; ++i) {
          auto r = s->Update(Kind::kPoolLease, "counter", Increment());
          if (r.ok()) {
            ++ok;
          } else if (absl::IsAborted(r.status())) {
            ++conflicts;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(ok + conflicts == 2 * kThreadsPerStore * kEach);
  BOOST_TEST(ok > 0);
  auto final_obj = a->Get(Kind::kPoolLease, "counter");
  BOOST_REQUIRE(final_obj.ok());
  BOOST_TEST(*(*final_obj)->spec.lease_transitions == ok.load());
}

// client-go's LeaseLock: read, then update only if the resourceVersion is still
// the one read. Each success must have started from the previous success.
BOOST_FIXTURE_TEST_CASE(ConditionalUpdatesHaveOneWinnerPerVersion, TwoReplicas) {
  Write(*a, Kind::kPoolLease, "lock", "start");
  std::atomic<int> ok{0};
  std::mutex mu;
  std::vector<int64_t> read_versions_of_winners;  // asserted on the test's thread
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    Store* s = t % 2 ? b.get() : a.get();
    threads.emplace_back([s, t, &ok, &mu, &read_versions_of_winners] {
      for (int i = 0; i < 8; ++i) {
        auto read = s->Get(Kind::kPoolLease, "lock");
        if (!read.ok()) continue;
        const int64_t rv = (*read)->metadata.resource_version;
        auto r = s->Update(
            Kind::kPoolLease, "lock",
            [rv, t](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
              if (!cur || cur->metadata.resource_version != rv) {
                return StaleResourceVersionError("poolleases", "lock");
              }
              auto next = std::make_shared<Object>(*cur);
              next->spec.holder_identity = "t" + std::to_string(t);
              next->spec.lease_transitions = next->spec.lease_transitions.value_or(0) + 1;
              return next;
            });
        if (r.ok()) {
          ++ok;
          std::lock_guard<std::mutex> lock(mu);
          read_versions_of_winners.push_back(rv);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  // Two winners from one read version would be a lost update.
  const std::set<int64_t> distinct(read_versions_of_winners.begin(), read_versions_of_winners.end());
  BOOST_TEST(distinct.size() == read_versions_of_winners.size());
  BOOST_TEST(read_versions_of_winners.size() == static_cast<size_t>(ok.load()));
  auto final_obj = a->Get(Kind::kPoolLease, "lock");
  BOOST_REQUIRE(final_obj.ok());
  BOOST_TEST(ok > 0);
  BOOST_TEST(*(*final_obj)->spec.lease_transitions == ok.load());
}

BOOST_FIXTURE_TEST_CASE(ExactlyOneCreateIfAbsentWins, TwoReplicas) {
  std::atomic<int> winners{0};
  std::atomic<int> already{0};
  std::string winner;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    Store* s = t % 2 ? b.get() : a.get();
    threads.emplace_back([s, t, &winners, &already, &winner, &mu] {
      const std::string me = "n" + std::to_string(t);
      auto r =
          s->Update(Kind::kPoolLease, "pool",
                    [me](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
                      if (cur) return AlreadyExistsError("poolleases", "pool");
                      return NewLease(Kind::kPoolLease, me);
                    });
      if (r.ok()) {
        ++winners;
        std::lock_guard<std::mutex> lock(mu);
        winner = me;
      } else if (absl::IsAlreadyExists(r.status())) {
        ++already;
      }
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(winners == 1);
  BOOST_TEST(already == 7);
  BOOST_TEST(*(*a->Get(Kind::kPoolLease, "pool"))->spec.holder_identity == winner);
}

// fn reads another key through the TxnReader; that key changes between the read
// and the commit: the commit must fail and fn run again on the fresh value.
BOOST_FIXTURE_TEST_CASE(TxnReaderKeyChangedConcurrentlyRetriesWithFreshData, TwoReplicas) {
  Write(*a, Kind::kPoolLease, "pool", "leader-1");
  std::vector<std::string> seen;
  auto r = a->Update(Kind::kDelegatedLease, "node",
                     [&](const ObjectPtr&, TxnReader& reader) -> absl::StatusOr<MutableObjectPtr> {
                       ObjectPtr pool = reader.Get(Kind::kPoolLease, "pool");
                       if (!pool) return InternalError("pool lease missing");
                       seen.push_back(*pool->spec.holder_identity);
                       if (seen.size() == 1) Write(*b, Kind::kPoolLease, "pool", "leader-2");
                       auto next = NewLease(Kind::kDelegatedLease, "node");
                       next->spec.delegate = *pool->spec.holder_identity;
                       return next;
                     });
  BOOST_REQUIRE(r.ok());
  BOOST_REQUIRE_EQUAL(seen.size(), 2u);
  BOOST_TEST(seen[0] == "leader-1");
  BOOST_TEST(seen[1] == "leader-2");
  BOOST_TEST(*(*a->Get(Kind::kDelegatedLease, "node"))->spec.delegate == "leader-2");
}

BOOST_FIXTURE_TEST_CASE(TxnReaderAbsentKeyCreatedConcurrentlyRetries, TwoReplicas) {
  int calls = 0;
  auto r = a->Update(Kind::kDelegatedLease, "node",
                     [&](const ObjectPtr&, TxnReader& reader) -> absl::StatusOr<MutableObjectPtr> {
                       ++calls;
                       ObjectPtr pool = reader.Get(Kind::kPoolLease, "pool");
                       if (calls == 1) {
                         BOOST_TEST(!pool);
                         Write(*b, Kind::kPoolLease, "pool", "leader");
                       }
                       auto next = NewLease(Kind::kDelegatedLease, "node");
                       next->spec.delegate = pool ? *pool->spec.holder_identity : "";
                       return next;
                     });
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(calls == 2);
  BOOST_TEST(*(*a->Get(Kind::kDelegatedLease, "node"))->spec.delegate == "leader");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Lists)

BOOST_AUTO_TEST_CASE(PaginationWithPredicateAtOneRevision) {
  Etcd3StoreOptions options;
  options.list_page_size = 3;  // forces several range pages per List
  auto store = NewStore(UniquePrefix(), options);
  for (int i = 0; i < 10; ++i) {
    Write(*store, Kind::kPoolLease, "p0" + std::to_string(i), i % 2 ? "odd" : "even");
  }
  Write(*store, Kind::kDelegatedLease, "p05",
        "even");  // another kind: never listed

  ListOptions all;
  auto listed = store->List(Kind::kPoolLease, all);
  BOOST_REQUIRE(listed.ok());
  BOOST_TEST(listed->items.size() == 10u);
  BOOST_TEST(listed->revision == store->CurrentRevision());
  BOOST_TEST(listed->next_name.empty());

  ListOptions even;
  even.limit = 2;
  even.predicate = [](const Object& o) { return *o.spec.holder_identity == "even"; };
  auto page1 = store->List(Kind::kPoolLease, even);
  BOOST_REQUIRE(page1.ok());
  BOOST_REQUIRE(page1->items.size() == 2u);
  BOOST_TEST(page1->items[0]->metadata.name == "p00");
  BOOST_TEST(page1->items[1]->metadata.name == "p02");
  BOOST_TEST(page1->next_name == "p04");
  BOOST_TEST(page1->remaining == 3);
  const int64_t list_revision = page1->revision;

  // A write between pages: later pages still show the first page's revision.
  Write(*store, Kind::kPoolLease, "p08", "odd");
  even.after_name = "p02";
  even.at_revision = list_revision;
  auto page2 = store->List(Kind::kPoolLease, even);
  BOOST_REQUIRE(page2.ok());
  BOOST_REQUIRE(page2->items.size() == 2u);
  BOOST_TEST(page2->items[0]->metadata.name == "p04");
  BOOST_TEST(page2->items[1]->metadata.name == "p06");
  BOOST_TEST(page2->next_name == "p08");
  BOOST_TEST(page2->remaining == 1);
  BOOST_TEST(page2->revision == list_revision);

  even.at_revision = 0;  // the newest: p08 turned odd
  even.after_name = "p06";
  auto fresh = store->List(Kind::kPoolLease, even);
  BOOST_REQUIRE(fresh.ok());
  BOOST_TEST(fresh->items.empty());
  BOOST_TEST(fresh->next_name.empty());

  ListOptions first3;
  first3.limit = 3;
  auto unfiltered = store->List(Kind::kPoolLease, first3);
  BOOST_REQUIRE(unfiltered.ok());
  BOOST_TEST(unfiltered->items.size() == 3u);
  BOOST_TEST(unfiltered->next_name == "p03");
  BOOST_TEST(unfiltered->remaining == 7);

  ListOptions future;
  future.at_revision = store->CurrentRevision() + 100;
  auto too_new = store->List(Kind::kPoolLease, future);
  BOOST_TEST(ApiErrorFromStatus(too_new.status()).code == 504);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Watches)

BOOST_FIXTURE_TEST_CASE(WatchOnOneStoreSeesWritesOfAnotherInOrder, TwoReplicas) {
  auto watcher = a->Watch(Kind::kPoolLease, 0);
  BOOST_REQUIRE_MESSAGE(watcher.ok(), watcher.status().ToString());

  const int64_t r1 = Write(*b, Kind::kPoolLease, "p", "n1");
  Write(*b, Kind::kDelegatedLease, "x", "n1");  // other kind
  const int64_t r2 = Write(*b, Kind::kPoolLease, "p", "n2");
  auto del = b->Update(Kind::kPoolLease, "p", Remove());
  BOOST_REQUIRE(del.ok());
  const int64_t r3 = del->object->metadata.resource_version;

  auto events = Drain(**watcher, 3);
  BOOST_REQUIRE(events.size() == 3u);
  BOOST_TEST(static_cast<int>(events[0]->type) == static_cast<int>(EventType::kAdded));
  BOOST_TEST(events[0]->revision == r1);
  BOOST_TEST(events[0]->object->metadata.resource_version == r1);
  BOOST_TEST(*events[0]->object->spec.holder_identity == "n1");
  BOOST_TEST(!events[0]->previous);

  BOOST_TEST(static_cast<int>(events[1]->type) == static_cast<int>(EventType::kModified));
  BOOST_TEST(events[1]->revision == r2);
  BOOST_TEST(*events[1]->object->spec.holder_identity == "n2");
  BOOST_REQUIRE(events[1]->previous);
  BOOST_TEST(*events[1]->previous->spec.holder_identity == "n1");
  BOOST_TEST(events[1]->previous->metadata.resource_version == r1);

  BOOST_TEST(static_cast<int>(events[2]->type) == static_cast<int>(EventType::kDeleted));
  BOOST_TEST(events[2]->revision == r3);
  BOOST_TEST(events[2]->object->metadata.resource_version == r3);
  BOOST_TEST(events[2]->object->metadata.name == "p");
  BOOST_TEST(*events[2]->object->spec.holder_identity == "n2");
  BOOST_REQUIRE(events[2]->previous);
  BOOST_TEST(events[2]->previous->metadata.resource_version == r2);

  // Nothing else (the DelegatedLease write is not ours).
  BOOST_TEST(!(*watcher)->Next(milliseconds(200)));
  BOOST_TEST(!(*watcher)->Closed());
}

BOOST_AUTO_TEST_CASE(ResumeFromARevision) {
  auto store = NewStore(UniquePrefix());
  const int64_t r0 = store->CurrentRevision();
  const int64_t r1 = Write(*store, Kind::kPoolLease, "a", "n1");
  const int64_t r2 = Write(*store, Kind::kPoolLease, "b", "n1");
  const int64_t r3 = Write(*store, Kind::kPoolLease, "a", "n2");

  auto from0 = store->Watch(Kind::kPoolLease, r0);
  BOOST_REQUIRE(from0.ok());
  auto events = Drain(**from0, 3);
  BOOST_REQUIRE(events.size() == 3u);
  BOOST_TEST(events[0]->revision == r1);
  BOOST_TEST(events[1]->revision == r2);
  BOOST_TEST(events[2]->revision == r3);
  BOOST_TEST(static_cast<int>(events[2]->type) == static_cast<int>(EventType::kModified));

  auto from1 = store->Watch(Kind::kPoolLease, r1);
  BOOST_REQUIRE(from1.ok());
  events = Drain(**from1, 2);
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0]->revision == r2);
  BOOST_TEST(events[1]->revision == r3);
  BOOST_TEST(!(*from1)->Next(milliseconds(100)));

  auto future = store->Watch(Kind::kPoolLease, store->CurrentRevision() + 5);
  BOOST_REQUIRE(!future.ok());
  const ApiErrorInfo info = ApiErrorFromStatus(future.status());
  BOOST_TEST(info.code == 504);
}

BOOST_AUTO_TEST_CASE(CompactionExpiresOldStartingPoints) {
  const std::string prefix = UniquePrefix();
  auto store = NewStore(prefix);
  const int64_t r1 = Write(*store, Kind::kPoolLease, "a", "n1");
  Write(*store, Kind::kPoolLease, "a", "n2");
  const int64_t r3 = Write(*store, Kind::kPoolLease, "a", "n3");
  const int64_t r4 = Write(*store, Kind::kPoolLease, "a", "n4");
  Compact(r3);

  // etcd keeps revision r3 and later: watches from r3 - 1 on still work.
  BOOST_TEST(store->OldestWatchableRevision() == r3 - 1);
  auto old = store->Watch(Kind::kPoolLease, r1);
  BOOST_REQUIRE(!old.ok());
  BOOST_TEST(absl::IsOutOfRange(old.status()));
  const ApiErrorInfo info = ApiErrorFromStatus(old.status());
  BOOST_TEST(info.code == 410);
  BOOST_TEST(info.message == "too old resource version: " + std::to_string(r1) + " (" +
                                 std::to_string(r3 - 1) + ")");

  auto oldest = store->Watch(Kind::kPoolLease, r3 - 1);
  BOOST_REQUIRE_MESSAGE(oldest.ok(), oldest.status().ToString());
  auto events = Drain(**oldest, 2);
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0]->revision == r3);
  BOOST_TEST(events[1]->revision == r4);

  ListOptions pinned;
  pinned.at_revision = r1;
  auto list = store->List(Kind::kPoolLease, pinned);
  BOOST_TEST(ApiErrorFromStatus(list.status()).code == 410);

  // A second store learns the compact revision from etcd, not from its own
  // past.
  auto other = NewStore(prefix);
  BOOST_TEST(other->OldestWatchableRevision() == r3 - 1);
}

BOOST_AUTO_TEST_CASE(SlowConsumerIsClosedWithAnError) {
  Etcd3StoreOptions options;
  options.watcher_queue_limit = 2;
  auto store = NewStore(UniquePrefix(), options);
  auto watcher = store->Watch(Kind::kPoolLease, 0);
  BOOST_REQUIRE(watcher.ok());
  for (int i = 0; i < 5; ++i) Write(*store, Kind::kPoolLease, "p", "n" + std::to_string(i));
  EventPtr first;
  for (int i = 0; i < 50 && !(*watcher)->Closed(); ++i)
    std::this_thread::sleep_for(milliseconds(20));
  BOOST_TEST((*watcher)->Closed());
  first = (*watcher)->Next(milliseconds(1000));
  BOOST_REQUIRE(first);
  BOOST_TEST(static_cast<int>(first->type) == static_cast<int>(EventType::kError));
  BOOST_TEST(!(*watcher)->Next(milliseconds(10)));
}

BOOST_AUTO_TEST_CASE(StopAndShutdownEndWatchesPromptly) {
  auto store = NewStore(UniquePrefix());
  auto w1 = store->Watch(Kind::kPoolLease, 0);
  auto w2 = store->Watch(Kind::kDelegatedLease, 0);
  BOOST_REQUIRE(w1.ok());
  BOOST_REQUIRE(w2.ok());

  // Stop aborts the stream: without it, the join below would wait until etcd
  // closed the idle stream, which it does not do.
  const auto start = std::chrono::steady_clock::now();
  (*w1)->Stop();
  BOOST_TEST((*w1)->Closed());
  w1->reset();  // joins the stream thread
  BOOST_TEST(ElapsedMs(start) < 30'000);

  EventPtr e;  // no Boost.Test assertions off the test's thread
  std::thread blocked([&] { e = (*w2)->Next(milliseconds(60'000)); });
  BOOST_TEST(testing::UntilWaitingInNext(1));  // it waits before Shutdown comes
  const auto before_shutdown = std::chrono::steady_clock::now();
  store->Shutdown();
  blocked.join();
  BOOST_TEST(ElapsedMs(before_shutdown) < 30'000);  // woken, not timed out
  BOOST_REQUIRE(e);
  BOOST_TEST(static_cast<int>(e->type) == static_cast<int>(EventType::kError));
  BOOST_TEST((*w2)->Closed());
  BOOST_TEST(absl::IsUnavailable(store->Watch(Kind::kPoolLease, 0).status()));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ObservedTime)

// Each store judges a renewal from when it first saw the revision on its own
// monotonic clock; its own writes keep the time fn chose.
BOOST_FIXTURE_TEST_CASE(StampedOnFirstSightPerProcess, TwoClockedReplicas) {

  auto renew = [](int64_t observed) {
    return [observed](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
      auto next = cur ? std::make_shared<Object>(*cur) : NewLease(Kind::kPoolLease, "n1");
      next->observed_monotonic_us = observed;
      return next;
    };
  };
  BOOST_REQUIRE(a->Update(Kind::kPoolLease, "p", renew(1'000)).ok());
  BOOST_TEST((*a->Get(Kind::kPoolLease, "p"))->observed_monotonic_us == 1'000);
  BOOST_TEST((*b->Get(Kind::kPoolLease, "p"))->observed_monotonic_us == 50'000);
  clock_b = 60'000;
  // Same revision: still the first sight.
  BOOST_TEST((*b->Get(Kind::kPoolLease, "p"))->observed_monotonic_us == 50'000);
  clock_a = 2'000;
  BOOST_REQUIRE(a->Update(Kind::kPoolLease, "p", renew(2'000)).ok());
  clock_b = 70'000;
  BOOST_TEST((*b->Get(Kind::kPoolLease, "p"))->observed_monotonic_us == 70'000);
  BOOST_TEST((*a->Get(Kind::kPoolLease, "p"))->observed_monotonic_us == 2'000);
}

// A write that renews nothing (status.observedTime unchanged: the GC's
// expired mark, a delegation challenge) keeps the first sight of the renewal
// it carries on every replica; before, replica b stamped the new revision with
// its "now" and so moved the lease's expiry later by each status write.
BOOST_FIXTURE_TEST_CASE(StatusWritesDoNotRenew, TwoClockedReplicas) {

  auto write = [](int64_t observed, int64_t observed_time, std::string challenge) {
    return [=](const ObjectPtr& cur, TxnReader&) -> absl::StatusOr<MutableObjectPtr> {
      auto next = cur ? std::make_shared<Object>(*cur) : NewLease(Kind::kPoolLease, "n1");
      if (observed != 0) next->observed_monotonic_us = observed;
      next->status.observed_time_us = observed_time;
      if (!challenge.empty()) {
        MutableDelegation(*next).challenges.insert(
            MutableDelegation(*next).challenges.begin(), DelegationChallenge{challenge, 5});
      }
      return next;
    };
  };
  BOOST_REQUIRE(a->Update(Kind::kPoolLease, "p", write(1'000, 111, "")).ok());
  BOOST_TEST((*b->Get(Kind::kPoolLease, "p"))->observed_monotonic_us == 50'000);
  // A challenge written through a (status only; observed time kept by fn).
  clock_a = 3'000;
  clock_b = 80'000;
  BOOST_REQUIRE(a->Update(Kind::kPoolLease, "p", write(0, 111, "c1")).ok());
  auto seen = b->Get(Kind::kPoolLease, "p");
  BOOST_REQUIRE(seen.ok());
  BOOST_TEST(DelegationOf(**seen).challenges.size() == 1u);
  BOOST_TEST((*seen)->observed_monotonic_us == 50'000);
  BOOST_TEST((*a->Get(Kind::kPoolLease, "p"))->observed_monotonic_us == 1'000);
  // A renewal (a new observedTime) is a new first sight.
  BOOST_REQUIRE(a->Update(Kind::kPoolLease, "p", write(3'000, 222, "")).ok());
  clock_b = 90'000;
  BOOST_TEST((*b->Get(Kind::kPoolLease, "p"))->observed_monotonic_us == 90'000);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace poolcoord::store
