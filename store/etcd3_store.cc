#include "store/etcd3_store.h"
#include "base/string_view.h"
#include "store/watch_channel.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <random>
#include <span>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "store/api_error.h"
#include "store/etcd3_client.h"
#include "store/object_codec.h"

namespace poolcoord::store {
namespace {

constexpr int kMaxUpdateAttempts = 20;
// etcd's default --max-txn-ops: operations one transaction may hold.
constexpr size_t kMaxTxnOps = 128;
// The observed-time table forgets everything beyond this many keys; forgetting
// only makes a lease look renewed later, never earlier.
constexpr size_t kMaxObservedKeys = 200'000;


std::string B64(std::string_view s) { return absl::Base64Escape(base::Av(s)); }

// The first key after every key that starts with `prefix` (etcd's range_end for
// a prefix range).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char c = static_cast<unsigned char>(prefix.back());
    if (c < 0xff) {
      prefix.back() = static_cast<char>(c + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // the whole key space
}

// int64 fields arrive as decimal strings (proto3 JSON); absent means 0.
int64_t Int64Field(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return 0;
  auto it = v.FindMember(name);
  if (it == v.MemberEnd()) return 0;
  if (it->value.IsInt64()) return it->value.GetInt64();
  int64_t out = 0;
  if (it->value.IsString() && absl::SimpleAtoi(it->value.GetString(), &out)) return out;
  return 0;
}

bool BoolField(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return false;
  auto it = v.FindMember(name);
  return it != v.MemberEnd() && it->value.IsBool() && it->value.GetBool();
}

std::string BytesField(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return "";
  auto it = v.FindMember(name);
  if (it == v.MemberEnd() || !it->value.IsString()) return "";
  std::string out;
  absl::Base64Unescape(absl::string_view(it->value.GetString(), it->value.GetStringLength()), &out);
  return out;
}

const rapidjson::Value* Member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

int64_t HeaderRevision(const rapidjson::Value& answer) {
  const rapidjson::Value* header = Member(answer, "header");
  return header ? Int64Field(*header, "revision") : 0;
}

// etcd's mvcc.ErrCompacted and ErrFutureRev, as the gateway reports them.
bool IsCompacted(const absl::Status& s) {
  return absl::IsOutOfRange(s) && absl::StrContains(s.message(), "compacted");
}
bool IsFutureRevision(const absl::Status& s) {
  return absl::IsOutOfRange(s) && absl::StrContains(s.message(), "future revision");
}

// One mvccpb.KeyValue.
struct Kv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
};

Kv ReadKv(const rapidjson::Value& v) {
  Kv kv;
  kv.key = BytesField(v, "key");
  kv.value = BytesField(v, "value");
  kv.create_revision = Int64Field(v, "create_revision");
  kv.mod_revision = Int64Field(v, "mod_revision");
  return kv;
}

struct RangeAnswer {
  int64_t revision = 0;  // header.revision: the store revision the range read
  std::vector<Kv> kvs;
  int64_t count = 0;  // keys in the whole range, regardless of limit
  bool more = false;
};

// This process's first sight of each renewal of a key, on its own monotonic
// clock (see etcd3_store.h). A renewal is a new RenewalTime (store/object.h),
// which the lease rules stamp on each renewal: a write that leaves it alone
// (the GC's expired mark, a new delegation challenge, an administrator's
// repair) makes a new mod_revision but renews nothing, so it keeps the first
// sight of the renewal it carries, and another replica's write does not move
// the object's expiry later.
class ObservedTimes {
 public:
  explicit ObservedTimes(std::function<int64_t()> now) : now_(std::move(now)) {}

  // `renewal`: the object's RenewalTime (0 when unset).
  int64_t Stamp(const std::string& key, int64_t mod_revision, int64_t renewal) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      if (it->second.revision == mod_revision) return it->second.observed_us;
      // An older state (a lagging read): the newer one's first sight is no
      // earlier than this one's, and still not before the write happened.
      if (it->second.revision > mod_revision) return it->second.observed_us;
      if (renewal != 0 && it->second.renewal == renewal) {
        it->second.revision = mod_revision;
        return it->second.observed_us;
      }
    }
    if (entries_.size() >= kMaxObservedKeys) entries_.clear();
    const int64_t now = now_();
    entries_[key] = Entry{mod_revision, now, renewal};
    return now;
  }

  // Our own write: fn chose the observed time.
  void Record(const std::string& key, int64_t mod_revision, int64_t observed_us, int64_t renewal) {
    absl::MutexLock lock(&mu_);
    auto& entry = entries_[key];
    if (entry.revision <= mod_revision) entry = Entry{mod_revision, observed_us, renewal};
  }

  void Forget(const std::string& key, int64_t delete_revision) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.revision <= delete_revision) entries_.erase(it);
  }

 private:
  struct Entry {
    int64_t revision = 0;
    int64_t observed_us = 0;
    int64_t renewal = 0;  // RenewalTime of that revision
  };
  const std::function<int64_t()> now_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// What the store and its watcher threads share; watcher threads keep it alive
// past the store.
class Core {
 public:
  Core(const Etcd3StoreOptions& options, std::unique_ptr<Etcd3Client> client)
      : options_(options), client_(std::move(client)), observed_(options.monotonic_micros) {}

  Etcd3Client& client() { return *client_; }
  const Etcd3StoreOptions& options() const { return options_; }
  ObservedTimes& observed() { return observed_; }

  std::string KindPrefix(Kind kind) const {
    return absl::StrCat(options_.prefix, "/", InfoFor(kind).plural, "/");
  }
  std::string Key(Kind kind, std::string_view name) const {
    return absl::StrCat(KindPrefix(kind), base::Av(name));
  }
  // A key no object uses, for reads that only want a revision.
  std::string ProbeKey() const { return absl::StrCat(options_.prefix, "/"); }

  void SeeRevision(int64_t revision) {
    int64_t seen = revision_.load();
    while (revision > seen && !revision_.compare_exchange_weak(seen, revision)) {
    }
  }
  int64_t cached_revision() const { return revision_.load(); }

  void SeeCompacted(int64_t compact_revision) {
    int64_t seen = compacted_.load();
    while (compact_revision > seen && !compacted_.compare_exchange_weak(seen, compact_revision)) {
    }
  }
  int64_t compacted_lower_bound() const { return compacted_.load(); }

  // A range read; revision 0 reads the newest (linearizable).
  absl::StatusOr<RangeAnswer> Range(std::string_view key, std::string_view range_end,
                                    int64_t revision, int64_t limit, bool count_only) {
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    w.StartObject();
    w.Key("key");
    w.String(B64(key));
    if (!range_end.empty()) {
      w.Key("range_end");
      w.String(B64(range_end));
    }
    if (limit > 0) {
      w.Key("limit");
      w.String(std::to_string(limit));
    }
    if (revision > 0) {
      w.Key("revision");
      w.String(std::to_string(revision));
    }
    if (count_only) {
      w.Key("count_only");
      w.Bool(true);
    }
    w.EndObject();
    auto answer = client_->Call("/v3/kv/range", std::string_view(buf.GetString(), buf.GetSize()),
                                /*idempotent=*/true);
    if (!answer.ok()) return answer.status();
    RangeAnswer out;
    out.revision = HeaderRevision(*answer);
    SeeRevision(out.revision);
    out.count = Int64Field(*answer, "count");
    out.more = BoolField(*answer, "more");
    if (const rapidjson::Value* kvs = Member(*answer, "kvs"); kvs && kvs->IsArray()) {
      for (const auto& kv : kvs->GetArray()) out.kvs.push_back(ReadKv(kv));
    }
    return out;
  }

  // A transaction (`body`: its JSON); notes the answer's revision.
  absl::StatusOr<rapidjson::Document> Txn(const rapidjson::StringBuffer& body, bool idempotent) {
    auto answer = client_->Call("/v3/kv/txn", std::string_view(body.GetString(), body.GetSize()),
                                idempotent);
    if (answer.ok()) SeeRevision(HeaderRevision(*answer));
    return answer;
  }

  // The newest revision, read fresh.
  absl::StatusOr<int64_t> FreshRevision() {
    auto answer = Range(ProbeKey(), "", 0, 1, /*count_only=*/true);
    if (!answer.ok()) return answer.status();
    return answer->revision;
  }

  absl::StatusOr<MutableObjectPtr> Decode(Kind kind, const Kv& kv) {
    auto decoded = DecodeFromStorage(kv.value, kind);
    if (!decoded.ok()) {
      return InternalError(absl::StrCat("cannot decode etcd key ", kv.key, " at revision ",
                                        kv.mod_revision, ": ", decoded.status().message()));
    }
    MutableObjectPtr obj = *std::move(decoded);
    obj->kind = kind;
    obj->metadata.resource_version = kv.mod_revision;
    obj->observed_monotonic_us =
        observed_.Stamp(kv.key, kv.mod_revision, RenewalTime(*obj));
    return obj;
  }

  // The compact revision: the oldest revision a range (and a watch start) may
  // name. Known lower bound first (one read when it is still right), then a
  // binary search above it: a range at R fails exactly when R < compact
  // revision.
  int64_t CompactRevision() {
    int64_t lo = std::max<int64_t>(compacted_.load(), 1);
    auto probe = Range(ProbeKey(), "", lo, 1, true);
    if (probe.ok() || !IsCompacted(probe.status())) return lo;
    auto current = FreshRevision();
    if (!current.ok()) return lo;
    int64_t bad = lo, good = *current;  // range at `bad` fails, at `good` works
    while (good - bad > 1) {
      const int64_t mid = bad + (good - bad) / 2;
      auto r = Range(ProbeKey(), "", mid, 1, true);
      if (r.ok()) {
        good = mid;
      } else if (IsCompacted(r.status())) {
        bad = mid;
      } else {
        return lo;
      }
    }
    SeeCompacted(good);
    return good;
  }

  // OldestWatchableRevision: Watch(from) starts etcd's watch at from + 1, which
  // etcd allows from the compact revision on.
  int64_t OldestWatchable() { return std::max<int64_t>(CompactRevision() - 1, 1); }

 private:
  const Etcd3StoreOptions options_;
  const std::unique_ptr<Etcd3Client> client_;
  ObservedTimes observed_;
  std::atomic<int64_t> revision_{0};
  std::atomic<int64_t> compacted_{1};
};


// One watch: the channel, the stream's stop switch and the handshake with
// Watch().
struct WatchState {
  explicit WatchState(size_t limit) : channel(limit) {}
  void Stop() {
    control.Stop();
    channel.Close();
  }
  WatchChannel channel;
  Etcd3StreamControl control;
  absl::Notification created;  // the watch stream is established, or failed
  absl::Status create_status;  // written before `created` is notified
};

// Runs on the watcher's thread until the stream ends.
void RunWatch(std::shared_ptr<Core> core, std::shared_ptr<WatchState> state, Kind kind,
              int64_t start_revision) {
  const std::string kind_prefix = core->KindPrefix(kind);
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("create_request");
  w.StartObject();
  w.Key("key");
  w.String(B64(kind_prefix));
  w.Key("range_end");
  w.String(B64(PrefixEnd(kind_prefix)));
  w.Key("start_revision");
  w.String(std::to_string(start_revision));
  w.Key("prev_kv");
  w.Bool(true);
  w.Key("progress_notify");
  w.Bool(true);
  w.EndObject();
  w.EndObject();

  auto created = [&](absl::Status s) {
    if (state->created.HasBeenNotified()) return;
    state->create_status = std::move(s);
    state->created.Notify();
  };

  auto translate = [&](const rapidjson::Value& ev) -> absl::StatusOr<EventPtr> {
    const rapidjson::Value* kv_json = Member(ev, "kv");
    if (kv_json == nullptr) return InternalError("etcd watch event without kv");
    const Kv kv = ReadKv(*kv_json);
    ObjectPtr previous;
    if (const rapidjson::Value* prev = Member(ev, "prev_kv")) {
      auto decoded = core->Decode(kind, ReadKv(*prev));
      if (!decoded.ok()) return decoded.status();
      previous = *std::move(decoded);
    }
    auto event = std::make_shared<Event>();
    event->revision = kv.mod_revision;
    event->previous = previous;
    const rapidjson::Value* type = Member(ev, "type");
    if (type != nullptr && type->IsString() && std::string_view(type->GetString()) == "DELETE") {
      event->type = EventType::kDeleted;
      auto last = previous ? std::make_shared<Object>(*previous) : std::make_shared<Object>();
      last->kind = kind;
      if (last->metadata.name.empty() && absl::StartsWith(kv.key, kind_prefix)) {
        last->metadata.name = kv.key.substr(kind_prefix.size());
      }
      last->metadata.resource_version = kv.mod_revision;
      event->object = std::move(last);
      core->observed().Forget(kv.key, kv.mod_revision);
    } else {
      auto decoded = core->Decode(kind, kv);
      if (!decoded.ok()) return decoded.status();
      event->object = *std::move(decoded);
      event->type =
          kv.create_revision == kv.mod_revision ? EventType::kAdded : EventType::kModified;
    }
    return EventPtr(std::move(event));
  };

  auto on_line = [&](std::string_view line) -> bool {
    rapidjson::Document doc;
    doc.Parse(line.data(), line.size());
    if (doc.HasParseError() || !doc.IsObject()) {
      created(
          InternalError(absl::StrCat("unreadable etcd watch message: ", base::Av(line.substr(0, 200)))));
      return false;
    }
    const rapidjson::Value* result = Member(doc, "result");
    if (result == nullptr) {
      // {"error": {...}}: the stream failed.
      created(absl::UnavailableError(absl::StrCat("etcd watch failed: ", base::Av(line.substr(0, 300)))));
      return false;
    }
    core->SeeRevision(HeaderRevision(*result));
    if (BoolField(*result, "created")) created(absl::OkStatus());
    if (BoolField(*result, "canceled")) {
      // A start revision compacted away; kube-apiserver's watcher turns the
      // same answer into an error event that makes clients relist.
      if (int64_t cr = Int64Field(*result, "compact_revision"); cr > 0) core->SeeCompacted(cr);
      created(
          ExpiredError(absl::StrCat("too old resource version: ", start_revision - 1, " (",
                                    std::max<int64_t>(core->compacted_lower_bound() - 1, 1), ")")));
      return false;
    }
    const rapidjson::Value* events = Member(*result, "events");
    if (events == nullptr || !events->IsArray()) return true;  // progress notification
    for (const auto& ev : events->GetArray()) {
      auto event = translate(ev);
      if (!event.ok()) return false;
      if (!state->channel.Push(*std::move(event))) return false;
    }
    return true;
  };

  absl::Status s = core->client().Stream(
      "/v3/watch", std::string_view(buf.GetString(), buf.GetSize()), on_line, &state->control);
  created(s.ok() ? absl::UnavailableError("etcd closed the watch stream before it started") : s);
  state->channel.Close();
}

class Etcd3Watcher final : public Watcher {
 public:
  Etcd3Watcher(std::shared_ptr<WatchState> state, std::thread thread)
      : state_(std::move(state)), thread_(std::move(thread)) {}
  ~Etcd3Watcher() override {
    state_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  Etcd3Watcher(const Etcd3Watcher&) = delete;
  Etcd3Watcher& operator=(const Etcd3Watcher&) = delete;

  EventPtr Next(std::chrono::milliseconds timeout) override {
    return state_->channel.Next(timeout);
  }
  EventPtr TryNext() override { return state_->channel.TryNext(); }
  bool NotifyWhenReady(std::function<void()> wake) override {
    return state_->channel.NotifyWhenReady(std::move(wake));
  }
  bool Closed() const override { return state_->channel.Closed(); }
  void Stop() override { state_->Stop(); }

 private:
  std::shared_ptr<WatchState> state_;
  std::thread thread_;
};

// The TxnReader of one Update attempt: reads at the attempt's revision and
// remembers every key with its mod_revision (0: absent) for the commit's
// compares.
class SnapshotReader final : public TxnReader {
 public:
  struct Read {
    ObjectPtr object;
    int64_t mod_revision = 0;
  };

  SnapshotReader(Core* core, int64_t revision) : core_(core), revision_(revision) {}

  void Remember(const std::string& key, ObjectPtr object, int64_t mod_revision) {
    reads_[key] = Read{std::move(object), mod_revision};
  }

  ObjectPtr Get(Kind kind, std::string_view name) override {
    const std::string key = core_->Key(kind, name);
    if (auto it = reads_.find(key); it != reads_.end()) return it->second.object;
    if (!error_.ok()) return nullptr;
    auto answer = core_->Range(key, "", revision_, 0, false);
    if (!answer.ok()) {
      error_ = answer.status();
      return nullptr;
    }
    if (answer->kvs.empty()) {
      Remember(key, nullptr, 0);
      return nullptr;
    }
    auto decoded = core_->Decode(kind, answer->kvs.front());
    if (!decoded.ok()) {
      error_ = decoded.status();
      return nullptr;
    }
    Remember(key, *decoded, answer->kvs.front().mod_revision);
    return *decoded;
  }

  const std::map<std::string, Read>& reads() const { return reads_; }
  const absl::Status& error() const { return error_; }

 private:
  Core* core_;
  const int64_t revision_;
  std::map<std::string, Read> reads_;
  absl::Status error_;
};

// Concurrent GetAll calls share transactions, as kube-apiserver batches the
// revision checks of its consistent reads from cache: while one transaction is
// in flight the calls that arrive meanwhile gather into the next, which the
// first of them sends as soon as the one in flight has returned. A call joins
// only a transaction not yet sent, so what it reads is still no older than
// every write acknowledged before it began; under load etcd runs one
// linearizable read (one ReadIndex) and the gateway one request for many
// reviews instead of one each, and a lone call waits for nothing.
class ReadBatcher {
 public:
  using Send =
      std::function<absl::StatusOr<std::vector<ObjectPtr>>(std::span<const ObjectKey> keys)>;

  // keys: 1 to kMaxTxnOps of them.
  absl::StatusOr<std::vector<ObjectPtr>> Read(std::span<const ObjectKey> keys, const Send& send) {
    mu_.Lock();
    if (open_ != nullptr && open_->keys.size() + keys.size() > kMaxTxnOps) {
      // The next transaction is full: this call goes on its own, at once.
      mu_.Unlock();
      return send(keys);
    }
    if (open_ == nullptr) open_ = std::make_shared<Batch>();
    const std::shared_ptr<Batch> batch = open_;
    const size_t offset = batch->keys.size();
    // The names stay valid: every caller waits here until its batch is done.
    batch->keys.insert(batch->keys.end(), keys.begin(), keys.end());
    auto ready = [this, &batch] {
      mu_.AssertReaderHeld();  // Await runs it under mu_
      return batch->done || (!in_flight_ && open_ == batch);
    };
    mu_.Await(absl::Condition(&ready));
    if (!batch->done) {
      // This call sends the batch; later calls gather into the next one.
      in_flight_ = true;
      open_ = nullptr;
      mu_.Unlock();
      absl::StatusOr<std::vector<ObjectPtr>> result = send(batch->keys);
      mu_.Lock();
      batch->result = std::move(result);
      batch->done = true;
      in_flight_ = false;
    }
    absl::StatusOr<std::vector<ObjectPtr>> out = absl::UnknownError("unset");
    if (!batch->result.ok()) {
      out = batch->result.status();
    } else {
      const auto first = batch->result->begin() + static_cast<std::ptrdiff_t>(offset);
      out = std::vector<ObjectPtr>(first, first + static_cast<std::ptrdiff_t>(keys.size()));
    }
    mu_.Unlock();
    return out;
  }

 private:
  struct Batch {
    std::vector<ObjectKey> keys;
    bool done = false;
    absl::StatusOr<std::vector<ObjectPtr>> result;
  };
  absl::Mutex mu_;
  std::shared_ptr<Batch> open_ ABSL_GUARDED_BY(mu_);  // gathering, not sent yet
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
};

class Etcd3Store final : public Store {
 public:
  explicit Etcd3Store(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~Etcd3Store() override { Shutdown(); }
  Etcd3Store(const Etcd3Store&) = delete;
  Etcd3Store& operator=(const Etcd3Store&) = delete;

  absl::StatusOr<ObjectPtr> Get(Kind kind, std::string_view name) override {
    const std::string key = core_->Key(kind, name);
    auto answer = core_->Range(key, "", 0, 0, false);
    if (!answer.ok()) return answer.status();
    if (answer->kvs.empty()) return NotFoundError(InfoFor(kind).plural, name);
    auto decoded = core_->Decode(kind, answer->kvs.front());
    if (!decoded.ok()) return decoded.status();
    return ObjectPtr(*std::move(decoded));
  }

  absl::StatusOr<std::vector<ObjectPtr>> GetAll(std::span<const ObjectKey> keys) override {
    if (keys.empty()) return std::vector<ObjectPtr>{};
    if (keys.size() > kMaxTxnOps) {
      return absl::InvalidArgumentError(absl::StrCat("GetAll reads at most ", kMaxTxnOps,
                                                     " keys in one etcd transaction, asked for ",
                                                     keys.size()));
    }
    return reads_.Read(keys, [this](std::span<const ObjectKey> batch) { return ReadInOneTxn(batch); });
  }

  // One transaction reading `keys` (at most kMaxTxnOps).
  absl::StatusOr<std::vector<ObjectPtr>> ReadInOneTxn(std::span<const ObjectKey> keys) {
    std::vector<ObjectPtr> out;
    // A transaction of ranges without compares: etcd runs it as one read at one
    // revision, linearizable (a ReadIndex) unless a range asks to be
    // serializable, which none does.
    std::vector<std::string> etcd_keys;
    etcd_keys.reserve(keys.size());
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    w.StartObject();
    w.Key("success");
    w.StartArray();
    for (const ObjectKey& key : keys) {
      etcd_keys.push_back(core_->Key(key.kind, key.name));
      w.StartObject();
      w.Key("request_range");
      w.StartObject();
      w.Key("key");
      w.String(B64(etcd_keys.back()));
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    auto answer = core_->Txn(buf, /*idempotent=*/true);
    if (!answer.ok()) return answer.status();
    const rapidjson::Value* responses = Member(*answer, "responses");
    if (!BoolField(*answer, "succeeded") || responses == nullptr || !responses->IsArray() ||
        responses->Size() != keys.size()) {
      return InternalError(absl::StrCat("etcd answered a read of ", keys.size(),
                                        " keys with an unexpected transaction result"));
    }
    out.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      const rapidjson::Value* range = Member((*responses)[static_cast<rapidjson::SizeType>(i)],
                                             "response_range");
      const rapidjson::Value* kvs = range ? Member(*range, "kvs") : nullptr;
      if (kvs == nullptr || !kvs->IsArray() || kvs->Empty()) {
        out.push_back(nullptr);
        continue;
      }
      const Kv kv = ReadKv((*kvs)[0]);
      if (kv.key != etcd_keys[i]) {
        return InternalError(absl::StrCat("etcd answered the read of ", etcd_keys[i],
                                          " with the key ", kv.key));
      }
      auto decoded = core_->Decode(keys[i].kind, kv);
      if (!decoded.ok()) return decoded.status();
      out.push_back(*std::move(decoded));
    }
    return out;
  }

  absl::StatusOr<ListResult> List(Kind kind, const ListOptions& options) override {
    const std::string kind_prefix = core_->KindPrefix(kind);
    const std::string end = PrefixEnd(kind_prefix);
    std::string from =
        options.after_name.empty()
            ? kind_prefix
            : absl::StrCat(kind_prefix, base::Av(options.after_name), std::string(1, '\0'));
    const bool filtered = static_cast<bool>(options.predicate);
    // Unfiltered and limited: one page of limit + 1 tells the next name, and
    // the range's count the rest.
    const int64_t page = (!filtered && options.limit > 0)
                             ? options.limit + 1
                             : std::max<int64_t>(core_->options().list_page_size, 1);
    ListResult result;
    int64_t revision = options.at_revision;
    while (true) {
      auto answer = core_->Range(from, end, revision, page, false);
      if (!answer.ok()) {
        if (IsCompacted(answer.status())) {
          return ExpiredError(
              "The provided continue parameter is too old to display a "
              "consistent list result. "
              "You can start a new list without the continue parameter.");
        }
        if (IsFutureRevision(answer.status())) {
          return TimeoutError(absl::StrCat("Too large resource version: ", revision,
                                           ", current: ", core_->cached_revision()),
                              /*rv_too_large=*/true);
        }
        return answer.status();
      }
      // Later pages read the first page's revision: one consistent list.
      if (revision == 0) revision = answer->revision;
      for (const Kv& kv : answer->kvs) {
        auto decoded = core_->Decode(kind, kv);
        if (!decoded.ok()) return decoded.status();
        if (filtered && !options.predicate(**decoded)) continue;
        if (options.limit > 0 && static_cast<int64_t>(result.items.size()) >= options.limit) {
          if (result.next_name.empty()) result.next_name = (*decoded)->metadata.name;
          ++result.remaining;
          continue;
        }
        result.items.push_back(*std::move(decoded));
      }
      if (!filtered && options.limit > 0) {
        if (!result.next_name.empty()) result.remaining = answer->count - options.limit;
        break;
      }
      if (!answer->more || answer->kvs.empty()) break;
      from = answer->kvs.back().key + std::string(1, '\0');
    }
    result.revision = revision;
    return result;
  }

  absl::StatusOr<WriteResult> Update(Kind kind, std::string_view name, const UpdateFn& fn,
                                     bool dry_run) override {
    const std::string key = core_->Key(kind, name);
    thread_local std::minstd_rand rng{std::random_device{}()};
    for (int attempt = 0; attempt < kMaxUpdateAttempts; ++attempt) {
      if (attempt >= 2) {
        // Spread contending writers apart so one of them wins.
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % (500 * attempt)));
      }
      auto first = core_->Range(key, "", 0, 0, false);
      if (!first.ok()) return first.status();
      SnapshotReader reader(core_.get(), first->revision);
      ObjectPtr current;
      if (!first->kvs.empty()) {
        auto decoded = core_->Decode(kind, first->kvs.front());
        if (!decoded.ok()) return decoded.status();
        current = *std::move(decoded);
        reader.Remember(key, current, first->kvs.front().mod_revision);
      } else {
        reader.Remember(key, nullptr, 0);
      }

      absl::StatusOr<MutableObjectPtr> proposed = fn(current, reader);
      if (!reader.error().ok()) {
        // fn saw an incomplete view; its verdict does not count.
        if (IsCompacted(reader.error())) continue;
        return reader.error();
      }
      if (!proposed.ok()) return proposed.status();
      MutableObjectPtr next = *std::move(proposed);

      WritePlan plan = PlanWrite(kind, name, current, next, dry_run);
      if (plan.done) return std::move(plan.result);
      WriteResult result = std::move(plan.result);

      std::string value;
      if (next) {
        // The revision is unknown until the commit; readers take it from
        // mod_revision.
        next->metadata.resource_version = 0;
        value = EncodeForStorage(*next);
      }
      auto committed = Commit(reader.reads(), key, next ? &value : nullptr);
      if (!committed.ok()) return committed.status();
      if (*committed == 0) continue;  // a compare failed: someone else wrote first
      const int64_t revision = *committed;
      if (next) {
        next->metadata.resource_version = revision;
        core_->observed().Record(key, revision, next->observed_monotonic_us, RenewalTime(*next));
        result.object = std::move(next);
      } else {
        auto last = std::make_shared<Object>(*current);
        last->metadata.resource_version = revision;
        core_->observed().Forget(key, revision);
        result.object = std::move(last);
      }
      return result;
    }
    return ConflictError(InfoFor(kind).plural, name,
                         absl::StrCat("the object kept changing during ", kMaxUpdateAttempts,
                                      " attempts to update it; please try again"));
  }

  absl::StatusOr<std::unique_ptr<Watcher>> Watch(Kind kind, int64_t from_revision) override {
    if (shutdown_.load()) return ServiceUnavailableError("the server is shutting down");
    if (from_revision < 0) {
      return BadRequestError(absl::StrCat("invalid resourceVersion ", from_revision));
    }
    auto current = core_->FreshRevision();
    if (!current.ok()) return current.status();
    if (from_revision > *current) {
      return TimeoutError(
          absl::StrCat("Too large resource version: ", from_revision, ", current: ", *current),
          /*rv_too_large=*/true);
    }
    if (from_revision == 0) from_revision = *current;
    if (from_revision < *current) {
      // etcd would accept the watch and cancel it a moment later; a range at
      // the start revision tells now.
      auto probe = core_->Range(core_->ProbeKey(), "", from_revision + 1, 1, true);
      if (!probe.ok()) {
        if (!IsCompacted(probe.status())) return probe.status();
        return ExpiredError(absl::StrCat("too old resource version: ", from_revision, " (",
                                         core_->OldestWatchable(), ")"));
      }
    }

    auto state = std::make_shared<WatchState>(core_->options().watcher_queue_limit);
    std::thread thread(RunWatch, core_, state, kind, from_revision + 1);
    auto watcher = std::make_unique<Etcd3Watcher>(state, std::move(thread));
    if (!state->created.WaitForNotificationWithTimeout(
            absl::FromChrono(core_->options().request_timeout))) {
      return absl::UnavailableError("etcd did not confirm the watch in time");
    }
    if (!state->create_status.ok()) return state->create_status;
    {
      absl::MutexLock lock(&mu_);
      watches_.erase(std::remove_if(watches_.begin(), watches_.end(),
                                    [](const auto& w) { return w.expired(); }),
                     watches_.end());
      watches_.push_back(state);
    }
    // Shutdown may have run between the first check and the registration.
    if (shutdown_.load()) state->Stop();
    return std::unique_ptr<Watcher>(std::move(watcher));
  }

  int64_t CurrentRevision() override {
    auto fresh = core_->FreshRevision();
    return fresh.ok() ? *fresh : core_->cached_revision();
  }

  int64_t OldestWatchableRevision() override { return core_->OldestWatchable(); }

  void Shutdown() override {
    shutdown_.store(true);
    absl::MutexLock lock(&mu_);
    for (auto& weak : watches_) {
      if (auto state = weak.lock()) state->Stop();
    }
    watches_.clear();
  }

 private:
  // One txn: every read key unchanged → put `value` at `key` (or delete it when
  // value is null). Returns the txn's revision, or 0 when a compare failed.
  absl::StatusOr<int64_t> Commit(const std::map<std::string, SnapshotReader::Read>& reads,
                                 const std::string& key, const std::string* value) {
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    w.StartObject();
    w.Key("compare");
    w.StartArray();
    for (const auto& [read_key, read] : reads) {
      w.StartObject();
      w.Key("key");
      w.String(B64(read_key));
      w.Key("result");
      w.String("EQUAL");
      if (read.mod_revision == 0) {
        w.Key("target");
        w.String("CREATE");
        w.Key("create_revision");
        w.String("0");
      } else {
        w.Key("target");
        w.String("MOD");
        w.Key("mod_revision");
        w.String(std::to_string(read.mod_revision));
      }
      w.EndObject();
    }
    w.EndArray();
    w.Key("success");
    w.StartArray();
    w.StartObject();
    if (value != nullptr) {
      w.Key("request_put");
      w.StartObject();
      w.Key("key");
      w.String(B64(key));
      w.Key("value");
      w.String(B64(*value));
      w.EndObject();
    } else {
      w.Key("request_delete_range");
      w.StartObject();
      w.Key("key");
      w.String(B64(key));
      w.EndObject();
    }
    w.EndObject();
    w.EndArray();
    w.EndObject();
    auto answer = core_->Txn(buf, /*idempotent=*/false);
    if (!answer.ok()) return answer.status();
    const int64_t revision = HeaderRevision(*answer);
    if (!BoolField(*answer, "succeeded")) return int64_t{0};
    return revision;
  }

  std::shared_ptr<Core> core_;
  ReadBatcher reads_;
  std::atomic<bool> shutdown_{false};
  absl::Mutex mu_;
  std::vector<std::weak_ptr<WatchState>> watches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> NewEtcd3Store(const Etcd3StoreOptions& options) {
  Etcd3StoreOptions opts = options;
  while (!opts.prefix.empty() && opts.prefix.back() == '/') opts.prefix.pop_back();
  if (opts.prefix.empty()) return absl::InvalidArgumentError("the etcd key prefix is empty");
  if (!opts.monotonic_micros) {
    opts.monotonic_micros = [] {
      return std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  Etcd3ClientOptions client_options;
  client_options.endpoints = opts.endpoints;
  client_options.ca_file = opts.ca_file;
  client_options.cert_file = opts.cert_file;
  client_options.key_file = opts.key_file;
  client_options.timeout = opts.request_timeout;
  auto client = Etcd3Client::New(std::move(client_options));
  if (!client.ok()) return client.status();
  auto core = std::make_shared<Core>(opts, *std::move(client));
  auto revision = core->FreshRevision();
  if (!revision.ok()) {
    std::string names;
    for (const auto& e : core->client().endpoints())
      absl::StrAppend(&names, names.empty() ? "" : ", ", e);
    return absl::UnavailableError(
        absl::StrCat("cannot reach etcd at ", names, ": ", revision.status().message()));
  }
  return std::unique_ptr<Store>(std::make_unique<Etcd3Store>(std::move(core)));
}

}  // namespace poolcoord::store
