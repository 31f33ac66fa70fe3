// poolcoord-loadgen: the HTTPS load generator of the benchmark suite (bench/run.sh).
//
// Modes (first argument):
//   open     Open loop at a fixed arrival rate. Request i is due at t0 + i/rate;
//            its latency runs from that due time to the last byte of the response,
//            so a stalled server is charged for every request that waited behind
//            it (no coordinated omission). Requests are spread over N keep-alive
//            connections; a busy connection queues its due requests.
//   closed   Closed loop over a work list: every key runs every template in order,
//            each connection owning keys c, c+N, ... (used to create objects fast).
//   fanout   W watchers hold a watch open; one writer PATCHes at a fixed rate; for
//            each write the time from sending it to the moment the last watcher
//            has its event.
//
// Requests come from template files:
//   line 1        METHOD TARGET
//   next lines    Header: value     (up to an empty line)
//   the rest      body (one trailing newline dropped)
// with placeholders {{f0}}..{{f9}} (tab-separated fields of the key's line in
// --keys), {{now}} (the MicroTime of the due time, 6 digits, UTC), {{old}} (that
// minus 10 s), {{uid}} (a fresh UUID-shaped id) and {{seq}}. A key is always used by
// one connection only, and {{now}} grows with the due time, so a key's renewTime
// never goes backwards.
//
// The result is one JSON object on stdout (latencies in microseconds); progress
// and errors go to stderr. Exit status 2 for usage errors, 1 when nothing worked.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/flag_set.h"
#include "bench/bench_flags.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

namespace {

// ---------------------------------------------------------------- flags

// The command line: every mode's flags (each mode reads its own), parsed by
// base::FlagSet (bench/bench_flags.h).
struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  int connections = 32;
  int threads = 1;
  std::string count_substring;
  std::string client_cert, client_key;
  std::vector<std::string> templates;
  std::string keys;
  double rate = 1000;  // fanout: 20
  double duration = 10;
  double warmup = 1;
  double drain = 5;
  double max_seconds = 120;
  std::string watch_template;
  int watchers = 1000;
  double setup_seconds = 60;
  int watcher_threads = 2;
  int64_t watcher_coalesce_us = 0;
  std::string per_write_out;
};

void AddFlags(Options* o, poolcoord::base::FlagSet& f) {
  f.String("host", &o->host, "The server's address.");
  f.Int("port", &o->port, 1, 65535, "The server's port (required).");
  f.Int("connections", &o->connections, 1, 1'000'000, "Keep-alive connections.");
  f.Int("threads", &o->threads, 1, 1024, "I/O threads.");
  f.StringArray("template", &o->templates, "A request template file; repeat for several.");
  f.String("keys", &o->keys, "Tab-separated fields per key ({{f0}}..{{f9}}).");
  f.String("count-substring", &o->count_substring, "Count the answers that contain it.");
  f.String("client-cert", &o->client_cert,
           "open, closed: a client certificate (PEM) to present, for identities only a "
           "certificate gives (system:node:<name>).");
  f.String("client-key", &o->client_key, "open, closed: its key (PEM; default: in --client-cert).");
  f.Double("rate", &o->rate, "open, fanout: requests (writes) per second.");
  f.Double("duration", &o->duration, "open, fanout: seconds of load.");
  f.Double("warmup", &o->warmup, "open: seconds before the measured load.");
  f.Double("drain", &o->drain, "open, fanout: seconds to wait for answers after the load.");
  f.Double("max-seconds", &o->max_seconds, "closed: give up after this long.");
  f.String("watch-template", &o->watch_template, "fanout: the watch request template.");
  f.Int("watchers", &o->watchers, 1, 1'000'000, "fanout: watches held open.");
  f.Double("setup-seconds", &o->setup_seconds, "fanout: seconds to open every watch.");
  f.Int("watcher-threads", &o->watcher_threads, 1, 1024, "fanout: threads reading the watches.");
  f.Int64("watcher-coalesce-us", &o->watcher_coalesce_us, 0,
          "fanout: microseconds a watcher thread waits to read several streams at once.");
  f.String("per-write-out", &o->per_write_out, "fanout: a file for one line per write.");
}

// ---------------------------------------------------------------- templates

// MicroTime as Kubernetes writes it: RFC 3339, UTC, exactly 6 fractional digits.
std::string MicroTime(int64_t unix_us) {
  time_t secs = static_cast<time_t>(unix_us / 1000000);
  int64_t us = unix_us % 1000000;
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06" PRId64 "Z", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
  return buf;
}

struct ExpandContext {
  const std::vector<std::string>* fields = nullptr;
  int64_t now_us = 0;  // wall clock, microseconds since the epoch
  uint64_t seq = 0;
  uint64_t uid_salt = 0;
};

class Text {
 public:
  Text() = default;
  explicit Text(std::string_view src) {
    size_t pos = 0;
    while (pos < src.size()) {
      size_t open = src.find("{{", pos);
      if (open == std::string_view::npos) {
        Literal(src.substr(pos));
        break;
      }
      size_t close = src.find("}}", open);
      if (close == std::string_view::npos) {
        Literal(src.substr(pos));
        break;
      }
      Literal(src.substr(pos, open - pos));
      std::string_view name = src.substr(open + 2, close - open - 2);
      Part p;
      if (name == "now") {
        p.kind = Kind::kNow;
      } else if (name == "old") {
        p.kind = Kind::kOld;
      } else if (name == "uid") {
        p.kind = Kind::kUid;
      } else if (name == "seq") {
        p.kind = Kind::kSeq;
      } else if (name.size() >= 2 && name[0] == 'f') {
        p.kind = Kind::kField;
        p.field = std::atoi(std::string(name.substr(1)).c_str());
      } else {
        p.kind = Kind::kLiteral;
        p.text = std::string(src.substr(open, close + 2 - open));
      }
      parts_.push_back(std::move(p));
      pos = close + 2;
    }
  }

  std::string Expand(const ExpandContext& ctx) const {
    std::string out;
    out.reserve(literal_bytes_ + 64);
    for (const Part& p : parts_) {
      switch (p.kind) {
        case Kind::kLiteral:
          out += p.text;
          break;
        case Kind::kNow:
          out += MicroTime(ctx.now_us);
          break;
        case Kind::kOld:
          out += MicroTime(ctx.now_us - 10'000'000);
          break;
        case Kind::kSeq:
          out += std::to_string(ctx.seq);
          break;
        case Kind::kUid: {
          char buf[40];
          uint64_t a = ctx.uid_salt, b = ctx.seq;
          std::snprintf(buf, sizeof(buf), "%08x-%04x-4%03x-8%03x-%012llx",
                        static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
                        static_cast<unsigned>(a & 0xfff), static_cast<unsigned>((b >> 48) & 0xfff),
                        static_cast<unsigned long long>(b & 0xffffffffffffULL));
          out += buf;
          break;
        }
        case Kind::kField:
          if (ctx.fields != nullptr && p.field >= 0 &&
              static_cast<size_t>(p.field) < ctx.fields->size()) {
            out += (*ctx.fields)[static_cast<size_t>(p.field)];
          }
          break;
      }
    }
    return out;
  }

 private:
  enum class Kind { kLiteral, kField, kNow, kOld, kUid, kSeq };
  struct Part {
    Kind kind = Kind::kLiteral;
    std::string text;
    int field = 0;
  };
  void Literal(std::string_view s) {
    if (s.empty()) return;
    literal_bytes_ += s.size();
    parts_.push_back(Part{Kind::kLiteral, std::string(s), 0});
  }
  std::vector<Part> parts_;
  size_t literal_bytes_ = 0;
};

struct Template {
  http::verb method = http::verb::get;
  Text target;
  std::vector<std::pair<std::string, Text>> headers;
  Text body;
  bool has_body = false;
};

bool LoadTemplate(const std::string& path, Template* t) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  size_t nl = all.find('\n');
  std::string first = all.substr(0, nl);
  size_t sp = first.find(' ');
  if (sp == std::string::npos) return false;
  t->method = http::string_to_verb(first.substr(0, sp));
  if (t->method == http::verb::unknown) return false;
  t->target = Text(first.substr(sp + 1));
  size_t pos = nl == std::string::npos ? all.size() : nl + 1;
  while (pos < all.size()) {
    size_t end = all.find('\n', pos);
    if (end == std::string::npos) end = all.size();
    std::string line = all.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) break;
    size_t colon = line.find(':');
    if (colon == std::string::npos) return false;
    size_t v = line.find_first_not_of(' ', colon + 1);
    t->headers.emplace_back(line.substr(0, colon), Text(v == std::string::npos ? "" : line.substr(v)));
  }
  if (pos < all.size()) {
    std::string body = all.substr(pos);
    if (!body.empty() && body.back() == '\n') body.pop_back();
    t->body = Text(body);
    t->has_body = true;
  }
  return true;
}

std::vector<std::vector<std::string>> LoadKeys(const std::string& path) {
  std::vector<std::vector<std::string>> keys;
  if (path.empty()) return keys;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> fields;
    size_t pos = 0;
    while (true) {
      size_t tab = line.find('\t', pos);
      fields.push_back(line.substr(pos, tab == std::string::npos ? std::string::npos : tab - pos));
      if (tab == std::string::npos) break;
      pos = tab + 1;
    }
    keys.push_back(std::move(fields));
  }
  return keys;
}

// ---------------------------------------------------------------- statistics

struct Stats {
  std::vector<uint32_t> latencies_us;
  std::map<int, uint64_t> statuses;  // HTTP status -> count (0: transport error)
  uint64_t completed = 0;
  uint64_t matched = 0;  // responses whose body contains --count-substring
  uint64_t all_completed = 0;  // open loop: warm-up responses included
  SteadyTime last_completion{};

  void Merge(const Stats& o) {
    latencies_us.insert(latencies_us.end(), o.latencies_us.begin(), o.latencies_us.end());
    for (const auto& [k, v] : o.statuses) statuses[k] += v;
    completed += o.completed;
    all_completed += o.all_completed;
    matched += o.matched;
    last_completion = std::max(last_completion, o.last_completion);
  }
};

uint32_t Percentile(const std::vector<uint32_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(q * static_cast<double>(sorted.size()));
  return sorted[std::min(i, sorted.size() - 1)];
}

std::string LatencyJson(std::vector<uint32_t>& v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (uint32_t x : v) sum += x;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "\"samples\":%zu,\"mean_us\":%.0f,\"p50_us\":%u,\"p90_us\":%u,\"p99_us\":%u,"
                "\"p999_us\":%u,\"max_us\":%u",
                v.size(), v.empty() ? 0.0 : sum / static_cast<double>(v.size()), Percentile(v, 0.5),
                Percentile(v, 0.9), Percentile(v, 0.99), Percentile(v, 0.999), v.empty() ? 0 : v.back());
  return buf;
}

std::string StatusJson(const std::map<int, uint64_t>& m) {
  std::string s = "{";
  for (const auto& [k, v] : m) {
    if (s.size() > 1) s += ",";
    s += "\"" + (k == 0 ? std::string("transport") : std::to_string(k)) + "\":" + std::to_string(v);
  }
  return s + "}";
}

// ---------------------------------------------------------------- the client connection

struct Target {
  std::string host = "127.0.0.1";
  unsigned short port = 0;
};

// One keep-alive HTTPS connection working through a queue of requests, one at a
// time (no pipelining, as Go's and kube's clients). All of its work runs on its
// own strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Item {
    std::shared_ptr<http::request<http::string_body>> req;
    SteadyTime due;
    bool measured = true;
  };
  using DoneFn = std::function<void(const Item&, int status, const std::string& body, SteadyTime done)>;
  using NextFn = std::function<std::optional<Item>()>;  // closed loop: the next item, if any

  Connection(net::io_context& ioc, ssl::context& ctx, Target target, DoneFn done)
      : ioc_(ioc),
        ctx_(ctx),
        strand_(net::make_strand(ioc)),
        target_(std::move(target)),
        done_(std::move(done)),
        backoff_(strand_) {}

  net::strand<net::io_context::executor_type>& strand() { return strand_; }
  void set_next(NextFn next) { next_ = std::move(next); }

  // On the strand.
  void Enqueue(Item item) {
    queue_.push_back(std::move(item));
    if (!busy_) Next();
  }
  void Kick() {
    net::post(strand_, [self = shared_from_this()] {
      if (!self->busy_) self->Next();
    });
  }
  size_t queued() const { return queue_.size() + (busy_ ? 1 : 0); }
  bool idle() const { return !busy_ && queue_.empty(); }

 private:
  void Next() {
    if (queue_.empty() && next_) {
      if (std::optional<Item> item = next_()) queue_.push_back(std::move(*item));
    }
    if (queue_.empty()) {
      busy_ = false;
      return;
    }
    busy_ = true;
    if (!stream_) return Connect();
    Send();
  }

  void Connect() {
    stream_.emplace(strand_, ctx_);
    SSL_set_tlsext_host_name(stream_->native_handle(), target_.host.c_str());
    tcp::endpoint ep(net::ip::make_address(target_.host), target_.port);
    beast::get_lowest_layer(*stream_).expires_after(std::chrono::seconds(10));
    beast::get_lowest_layer(*stream_).async_connect(ep, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->Fail();
      beast::error_code ignored;
      beast::get_lowest_layer(*self->stream_).socket().set_option(tcp::no_delay(true), ignored);
      self->stream_->async_handshake(ssl::stream_base::client, [self](beast::error_code ec) {
        if (ec) return self->Fail();
        self->Send();
      });
    });
  }

  void Send() {
    beast::get_lowest_layer(*stream_).expires_after(std::chrono::seconds(30));
    http::async_write(*stream_, *queue_.front().req,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->Fail();
                        self->res_.emplace();
                        self->res_->body_limit(64 * 1024 * 1024);
                        http::async_read(*self->stream_, self->buffer_, *self->res_,
                                         [self](beast::error_code ec, size_t) {
                                           if (ec) return self->Fail();
                                           self->Received();
                                         });
                      });
  }

  void Received() {
    SteadyTime now = SteadyClock::now();
    http::response<http::string_body> res = res_->release();
    res_.reset();
    Item item = std::move(queue_.front());
    queue_.pop_front();
    done_(item, res.result_int(), res.body(), now);
    if (!res.keep_alive()) Drop();
    Next();
  }

  void Drop() {
    if (stream_) {
      beast::error_code ignored;
      beast::get_lowest_layer(*stream_).socket().close(ignored);
      stream_.reset();
    }
    buffer_.clear();
  }

  // A transport error costs the request at the head of the queue; the connection
  // comes back after a short pause, so a dead server does not spin the loop.
  void Fail() {
    Drop();
    if (!queue_.empty()) {
      Item item = std::move(queue_.front());
      queue_.pop_front();
      done_(item, 0, std::string(), SteadyClock::now());
    }
    backoff_.expires_after(std::chrono::milliseconds(20));
    backoff_.async_wait([self = shared_from_this()](beast::error_code) { self->Next(); });
  }

  net::io_context& ioc_;
  ssl::context& ctx_;
  net::strand<net::io_context::executor_type> strand_;
  Target target_;
  DoneFn done_;
  NextFn next_;
  net::steady_timer backoff_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> res_;
  std::deque<Item> queue_;
  bool busy_ = false;
};

std::shared_ptr<http::request<http::string_body>> Build(const Template& t, const Target& target,
                                                        const ExpandContext& ctx) {
  auto req = std::make_shared<http::request<http::string_body>>(t.method, t.target.Expand(ctx), 11);
  req->set(http::field::host, target.host + ":" + std::to_string(target.port));
  req->set(http::field::user_agent, "poolcoord-loadgen");
  for (const auto& [name, value] : t.headers) req->set(name, value.Expand(ctx));
  if (t.has_body) {
    req->body() = t.body.Expand(ctx);
    req->prepare_payload();
  }
  req->keep_alive(true);
  return req;
}

struct Common {
  Target target;
  std::vector<Template> templates;
  std::vector<std::vector<std::string>> keys;
  int connections = 32;
  int threads = 1;
  std::string count_substring;
  uint64_t uid_salt = 0;
  // A client certificate (PEM) to present, for identities that only a
  // certificate gives (system:node:<name>).
  std::string client_cert, client_key;
};

bool LoadCommon(const Options& f, Common* c) {
  c->target.host = f.host;
  c->target.port = static_cast<unsigned short>(f.port);
  c->connections = f.connections;
  c->threads = f.threads;
  c->count_substring = f.count_substring;
  c->client_cert = f.client_cert;
  c->client_key = f.client_key;
  for (const std::string& path : f.templates) {
    Template t;
    if (!LoadTemplate(path, &t)) {
      std::fprintf(stderr, "loadgen: cannot read template %s\n", path.c_str());
      return false;
    }
    c->templates.push_back(std::move(t));
  }
  c->keys = LoadKeys(f.keys);
  if (c->keys.empty()) c->keys.push_back({});
  c->uid_salt = static_cast<uint64_t>(std::random_device{}()) * 0x9E3779B97F4A7C15ULL;
  if (c->target.port == 0 || c->templates.empty() || c->connections <= 0 || c->threads <= 0) {
    std::fprintf(stderr, "loadgen: --port, --template and positive --connections/--threads needed\n");
    return false;
  }
  return true;
}

int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void RunThreads(net::io_context& ioc, int n) {
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (std::thread& t : pool) t.join();
}

std::vector<size_t> KeysOf(const Common& c, int conn) {
  std::vector<size_t> out;
  const size_t n = static_cast<size_t>(c.connections);
  for (size_t k = static_cast<size_t>(conn); k < c.keys.size(); k += n) out.push_back(k);
  if (out.empty()) out.push_back(static_cast<size_t>(conn) % c.keys.size());
  return out;
}

// ---------------------------------------------------------------- open loop

// The client side of an open- or closed-loop run: --threads threads on one
// io_context, TLS without verification (the bench's certificates are made for
// the run), and one Stats per connection, merged at the end.
struct LoopClients {
  explicit LoopClients(const Common& c)
      : ioc(c.threads), n(c.connections), stats(static_cast<size_t>(c.connections)) {
    ctx.set_verify_mode(ssl::verify_none);
    if (!c.client_cert.empty()) {
      ctx.use_certificate_chain_file(c.client_cert);
      ctx.use_private_key_file(c.client_key.empty() ? c.client_cert : c.client_key, ssl::context::pem);
    }
  }
  Stats Total() const {
    Stats total;
    for (const Stats& s : stats) total.Merge(s);
    return total;
  }

  net::io_context ioc;
  ssl::context ctx{ssl::context::tls_client};
  const int n;
  std::vector<Stats> stats;
  std::vector<std::shared_ptr<Connection>> conns;
};

int RunOpen(const Options& f) {
  Common c;
  if (!LoadCommon(f, &c)) return 2;
  const double rate = f.rate;
  const double duration_s = f.duration;
  const double warmup_s = f.warmup;
  const double drain_s = f.drain;
  if (rate <= 0 || duration_s <= 0) return 2;

  LoopClients loop(c);
  net::io_context& ioc = loop.ioc;
  const int n = loop.n;
  std::vector<std::vector<size_t>> conn_keys;
  std::vector<uint64_t> conn_seq(static_cast<size_t>(n), 0);
  std::atomic<uint64_t> measured_done{0};
  for (int i = 0; i < n; ++i) {
    Stats* s = &loop.stats[static_cast<size_t>(i)];
    const std::string& needle = c.count_substring;
    loop.conns.push_back(std::make_shared<Connection>(
        ioc, loop.ctx, c.target, [s, &needle, &measured_done](const Connection::Item& item, int status,
                                                         const std::string& body, SteadyTime done) {
          ++s->all_completed;
          if (!item.measured) return;
          ++measured_done;
          ++s->statuses[status];
          ++s->completed;
          if (!needle.empty() && body.find(needle) != std::string::npos) ++s->matched;
          s->last_completion = std::max(s->last_completion, done);
          auto us = std::chrono::duration_cast<std::chrono::microseconds>(done - item.due).count();
          s->latencies_us.push_back(static_cast<uint32_t>(std::min<int64_t>(us, UINT32_MAX)));
        }));
    conn_keys.push_back(KeysOf(c, i));
  }

  const auto period = std::chrono::nanoseconds(static_cast<int64_t>(1e9 / rate));
  const SteadyTime t0 = SteadyClock::now() + std::chrono::milliseconds(200);
  const int64_t wall0 = WallMicros() + 200'000;
  const SteadyTime measure_from = t0 + std::chrono::duration_cast<SteadyClock::duration>(
                                           std::chrono::duration<double>(warmup_s));
  const SteadyTime end = measure_from + std::chrono::duration_cast<SteadyClock::duration>(
                                            std::chrono::duration<double>(duration_s));
  uint64_t seq = 0;
  std::atomic<uint64_t> measured_sent{0};
  auto strand = net::make_strand(ioc);
  net::steady_timer timer(strand);
  std::function<void()> tick = [&] {
    const SteadyTime now = SteadyClock::now();
    while (true) {
      const SteadyTime due = t0 + period * static_cast<int64_t>(seq);
      if (due >= end) return;  // the last request has been scheduled
      if (due > now) break;
      const size_t ci = static_cast<size_t>(seq % static_cast<uint64_t>(n));
      const std::vector<size_t>& ks = conn_keys[ci];
      ExpandContext ctx_e;
      ctx_e.fields = &c.keys[ks[conn_seq[ci] % ks.size()]];
      ctx_e.now_us = wall0 + std::chrono::duration_cast<std::chrono::microseconds>(due - t0).count();
      ctx_e.seq = seq;
      ctx_e.uid_salt = c.uid_salt;
      ++conn_seq[ci];
      const Template& t = c.templates[seq % c.templates.size()];
      Connection::Item item{Build(t, c.target, ctx_e), due, due >= measure_from};
      if (item.measured) ++measured_sent;
      net::post(loop.conns[ci]->strand(), [conn = loop.conns[ci], item = std::move(item)]() mutable {
        conn->Enqueue(std::move(item));
      });
      ++seq;
    }
    timer.expires_at(t0 + period * static_cast<int64_t>(seq));
    timer.async_wait([&](beast::error_code ec) {
      if (!ec) tick();
    });
  };
  net::post(strand, tick);

  // Stop once every measured request is answered, or at end + drain.
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    const SteadyTime hard_stop = end + std::chrono::duration_cast<SteadyClock::duration>(
                                           std::chrono::duration<double>(drain_s));
    while (SteadyClock::now() < hard_stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (SteadyClock::now() < end) continue;
      if (measured_done.load() >= measured_sent.load()) break;
    }
    finished = true;
    ioc.stop();
  });
  RunThreads(ioc, c.threads);
  watchdog.join();

  Stats total = loop.Total();
  const double window =
      total.completed == 0
          ? duration_s
          : std::max(duration_s, std::chrono::duration<double>(total.last_completion - measure_from).count());
  std::string lat = LatencyJson(total.latencies_us);
  std::printf(
      "{\"mode\":\"open\",\"target_rate\":%.0f,\"duration_s\":%.1f,\"connections\":%d,\"sent\":%" PRIu64
      ",\"completed\":%" PRIu64 ",\"unfinished\":%" PRIu64 ",\"completed_with_warmup\":%" PRIu64
      ",\"achieved_rate\":%.1f,\"matched\":%" PRIu64 ",%s,\"status\":%s}\n",
      rate, duration_s, n, measured_sent.load(), total.completed, measured_sent.load() - total.completed,
      total.all_completed,
      static_cast<double>(total.completed) / window, total.matched, lat.c_str(),
      StatusJson(total.statuses).c_str());
  return total.completed > 0 ? 0 : 1;
}

// ---------------------------------------------------------------- closed loop

// User + system CPU of this process so far, in ms.
double ProcessCpuMs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& tv) { return tv.tv_sec * 1e3 + tv.tv_usec / 1e3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}


int RunClosed(const Options& f) {
  Common c;
  if (!LoadCommon(f, &c)) return 2;
  const double max_s = f.max_seconds;
  LoopClients loop(c);
  net::io_context& ioc = loop.ioc;
  const int n = loop.n;
  struct Cursor {
    std::vector<size_t> keys;
    size_t key = 0, tmpl = 0;
    bool done = false;
  };
  std::vector<Cursor> cursors(static_cast<size_t>(n));
  std::atomic<int> remaining{n};
  std::atomic<uint64_t> seq{0};
  const SteadyTime start = SteadyClock::now();
  const double cpu_start_ms = ProcessCpuMs();
  for (int i = 0; i < n; ++i) {
    Cursor* cur = &cursors[static_cast<size_t>(i)];
    for (size_t k = static_cast<size_t>(i); k < c.keys.size(); k += static_cast<size_t>(n)) cur->keys.push_back(k);
    Stats* s = &loop.stats[static_cast<size_t>(i)];
    const std::string& needle = c.count_substring;
    auto conn = std::make_shared<Connection>(
        ioc, loop.ctx, c.target, [s, &needle](const Connection::Item& item, int status, const std::string& body,
                                         SteadyTime done) {
          ++s->statuses[status];
          ++s->completed;
          if (!needle.empty() && body.find(needle) != std::string::npos) ++s->matched;
          s->last_completion = std::max(s->last_completion, done);
          auto us = std::chrono::duration_cast<std::chrono::microseconds>(done - item.due).count();
          s->latencies_us.push_back(static_cast<uint32_t>(us));
          if (status >= 300 && s->statuses[status] <= 3) {
            std::fprintf(stderr, "loadgen: %s %s -> %d %.300s\n", std::string(item.req->method_string()).c_str(),
                         std::string(item.req->target()).c_str(), status, body.c_str());
          }
        });
    conn->set_next([cur, &c, &remaining, &seq, &ioc, start, max_s]() -> std::optional<Connection::Item> {
      if (cur->done) return std::nullopt;
      if (cur->key >= cur->keys.size() ||
          std::chrono::duration<double>(SteadyClock::now() - start).count() > max_s) {
        cur->done = true;
        if (--remaining == 0) ioc.stop();
        return std::nullopt;
      }
      ExpandContext e;
      e.fields = &c.keys[cur->keys[cur->key]];
      e.now_us = WallMicros();
      e.seq = seq++;
      e.uid_salt = c.uid_salt;
      auto req = Build(c.templates[cur->tmpl], c.target, e);
      if (++cur->tmpl == c.templates.size()) {
        cur->tmpl = 0;
        ++cur->key;
      }
      return Connection::Item{std::move(req), SteadyClock::now(), true};
    });
    loop.conns.push_back(conn);
  }
  for (auto& conn : loop.conns) conn->Kick();
  RunThreads(ioc, c.threads);
  const double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  // The load generator's own CPU for the loop (TLS, templates, parsing answers):
  // on a machine it shares with the server, what the server did not get.
  const double cpu_ms = ProcessCpuMs() - cpu_start_ms;
  Stats total = loop.Total();
  std::string lat = LatencyJson(total.latencies_us);
  std::printf("{\"mode\":\"closed\",\"connections\":%d,\"completed\":%" PRIu64
              ",\"elapsed_s\":%.2f,\"rate\":%.1f,\"cpu_ms\":%.1f,\"matched\":%" PRIu64
              ",%s,\"status\":%s}\n",
              n, total.completed, elapsed, static_cast<double>(total.completed) / elapsed, cpu_ms,
              total.matched, lat.c_str(), StatusJson(total.statuses).c_str());
  return total.completed > 0 ? 0 : 1;
}

// ---------------------------------------------------------------- watch fan-out

// Fan-out bookkeeping. The writer runs on the main thread and owns `writes`;
// watchers run on --watcher-threads threads of their own (one client thread
// reading 1,000 TLS streams would add its own serial delay to every
// measurement), each counting into its thread's Tally; the tallies are merged
// after the threads stopped, so the hot path takes no lock.
struct Write {
  SteadyTime sent{};
  int received = 0;
  SteadyTime last{};
  int status = -1;
};

struct Seen {
  int received = 0;
  SteadyTime last{};
};

struct Tally {
  std::unordered_map<std::string, Seen> by_renew_time;
  uint64_t events = 0;
  // A reader thread sees one write's event on each of its watches in a row:
  // the last key found saves a string and a hash per event (node addresses
  // stay valid across rehashing).
  std::string last_renew_time;
  Seen* last_seen = nullptr;
};

struct FanoutState {
  std::unordered_map<std::string, Write> writes;  // by the renewTime it carried
  std::atomic<int> watchers_ready{0};
  std::atomic<int> watchers_failed{0};
  std::atomic<int> watchers_lost{0};
  uint64_t events = 0;
};

std::string_view RenewTimeOf(std::string_view line) {
  static constexpr std::string_view kKey = "\"renewTime\":\"";
  size_t p = line.find(kKey);
  if (p == std::string_view::npos) return {};
  p += kKey.size();
  size_t q = line.find('"', p);
  if (q == std::string_view::npos) return {};
  return line.substr(p, q - p);
}

// One watch, read without Asio or Beast: a blocking connect, handshake and
// request, then the socket goes non-blocking into its reader thread's epoll set
// and OpenSSL reads it directly (read-ahead: one recv per readiness takes every
// record the socket has). The body is scanned for event lines, not de-chunked
// or parsed: an event is a line starting with '{' (the chunk framing lines are
// hex digits or empty), and its renewTime is found by substring. Reading 1,000
// streams on the machine the server runs on competes with the server for the
// CPU, so the reader should cost as little as a client can.
class Watcher {
 public:
  Watcher(SSL_CTX* ctx, Target target, std::string request, Tally* tally)
      : ctx_(ctx), target_(std::move(target)), request_(std::move(request)), tally_(tally) {}
  ~Watcher() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
  }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  int fd() const { return fd_; }

  // Connects, sends the watch request and reads the response header (blocking,
  // up to `timeout_s` per step). False with a message on failure.
  bool Open(double timeout_s, std::string* error) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return Fail("socket", error);
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout_s);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(target_.port);
    if (::inet_pton(AF_INET, target_.host.c_str(), &addr.sin_addr) != 1) {
      *error = "bad --host " + target_.host;
      return false;
    }
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return Fail("connect", error);
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_read_ahead(ssl_, 1);
    if (SSL_connect(ssl_) != 1) return Fail("handshake", error);
    size_t written = 0;
    if (SSL_write_ex(ssl_, request_.data(), request_.size(), &written) != 1) {
      return Fail("write", error);
    }
    std::string head;
    char buf[16384];
    size_t header_end;
    while ((header_end = head.find("\r\n\r\n")) == std::string::npos) {
      size_t n = 0;
      if (SSL_read_ex(ssl_, buf, sizeof buf, &n) != 1) return Fail("read header", error);
      head.append(buf, n);
    }
    if (head.compare(0, 13, "HTTP/1.1 200 ") != 0) {
      *error = "watch got " + head.substr(0, head.find('\r'));
      return false;
    }
    const int flags = ::fcntl(fd_, F_GETFL);
    ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
    const SteadyTime now = SteadyClock::now();
    Consume(std::string_view(head).substr(header_end + 4), now);
    return true;
  }

  // Reads what the socket has (its reader thread, on readiness). False once the
  // stream ended or failed.
  bool OnReadable(char* buf, size_t size) {
    const SteadyTime now = SteadyClock::now();
    for (;;) {
      size_t n = 0;
      if (SSL_read_ex(ssl_, buf, size, &n) == 1) {
        Consume(std::string_view(buf, n), now);
        if (SSL_has_pending(ssl_) == 0) return true;  // epoll says when there is more
        continue;
      }
      const int err = SSL_get_error(ssl_, 0);
      ERR_clear_error();
      return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
    }
  }

 private:
  bool Fail(const char* what, std::string* error) {
    *error = std::string(what) + ": " + std::strerror(errno);
    ERR_clear_error();
    return false;
  }

  void Consume(std::string_view data, SteadyTime now) {
    pending_.append(data.data(), data.size());
    size_t start = 0;
    for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(pending_.data() + start, nl - start);
      if (line.empty() || line[0] != '{') continue;  // chunk framing
      ++tally_->events;
      std::string_view rt = RenewTimeOf(line);
      if (rt.empty()) continue;
      if (tally_->last_seen == nullptr || rt != tally_->last_renew_time) {
        tally_->last_renew_time.assign(rt.data(), rt.size());
        tally_->last_seen = &tally_->by_renew_time[tally_->last_renew_time];
      }
      Seen& seen = *tally_->last_seen;
      ++seen.received;
      seen.last = std::max(seen.last, now);
    }
    pending_.erase(0, start);
  }

  SSL_CTX* ctx_;
  Target target_;
  std::string request_;
  Tally* tally_;
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::string pending_;
};

// One reader thread: opens its share of the watches one after the other, then
// reads whichever is ready until `stop`.
// `coalesce`: after a wake-up with work, the thread waits this long before the
// next epoll_wait, so that one wake-up reads many streams: an event reaches the
// watches one after another (~10-20 us apart), and waking the reader for each
// one cost about a quarter of the client's CPU and a wake-up in every send of
// the server, on a machine the two share. It adds at most `coalesce` to a
// measured latency, never hides any.
void RunWatchReader(std::vector<std::unique_ptr<Watcher>>* mine, FanoutState* state,
                    double setup_s, std::chrono::microseconds coalesce,
                    const std::atomic<bool>* stop) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  for (auto& w : *mine) {
    std::string error;
    if (!w->Open(setup_s, &error)) {
      if (state->watchers_failed++ < 3) std::fprintf(stderr, "loadgen: watcher %s\n", error.c_str());
      w.reset();
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = w.get();
    ::epoll_ctl(ep, EPOLL_CTL_ADD, w->fd(), &ev);
    ++state->watchers_ready;
  }
  std::vector<char> buf(64 * 1024);
  epoll_event events[256];
  bool busy = false;  // the last wait found work (and not a full list)
  while (!stop->load(std::memory_order_relaxed)) {
    if (busy && coalesce.count() > 0) std::this_thread::sleep_for(coalesce);
    const int n = ::epoll_wait(ep, events, 256, 100);
    busy = n > 0 && n < 256;
    for (int i = 0; i < n; ++i) {
      auto* w = static_cast<Watcher*>(events[i].data.ptr);
      if (!w->OnReadable(buf.data(), buf.size())) {
        ::epoll_ctl(ep, EPOLL_CTL_DEL, w->fd(), nullptr);
        if (state->watchers_lost++ < 3) std::fprintf(stderr, "loadgen: established watch lost\n");
      }
    }
  }
  ::close(ep);
}

int RunFanout(const Options& f) {
  Common c;
  if (!LoadCommon(f, &c)) return 2;  // --template: the write (PATCH with {{now}})
  Template watch_t;
  if (!LoadTemplate(f.watch_template, &watch_t)) {
    std::fprintf(stderr, "loadgen: --watch-template needed\n");
    return 2;
  }
  const int watchers = f.watchers;
  const double rate = f.rate;
  const double duration_s = f.duration;
  const double drain_s = f.drain;
  const double setup_s = f.setup_seconds;
  const int watcher_threads = f.watcher_threads;
  const auto coalesce = std::chrono::microseconds(f.watcher_coalesce_us);

  net::io_context ioc(1);
  // The main context's work (connect pacing, writes) comes and goes; it must
  // keep running until the drain ends.
  auto main_work = net::make_work_guard(ioc);
  std::vector<Tally> tallies(watcher_threads);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  ssl::context write_ctx(ssl::context::tls_client);
  write_ctx.set_verify_mode(ssl::verify_none);
  FanoutState state;

  ExpandContext we;
  we.now_us = WallMicros();
  we.fields = &c.keys[0];
  std::string watch_req;
  {
    std::ostringstream os;
    os << *Build(watch_t, c.target, we);
    watch_req = os.str();
  }
  std::vector<std::vector<std::unique_ptr<Watcher>>> shares(watcher_threads);
  for (int i = 0; i < watchers; ++i) {
    const int t = i % watcher_threads;
    shares[t].push_back(std::make_unique<Watcher>(ctx, c.target, watch_req, &tallies[t]));
  }
  std::atomic<bool> stop_readers{false};
  std::vector<std::thread> watcher_pool;
  for (int i = 0; i < watcher_threads; ++i) {
    watcher_pool.emplace_back(RunWatchReader, &shares[i], &state, setup_s, coalesce, &stop_readers);
  }

  // Wait for every watch to be established.
  const SteadyTime setup_start = SteadyClock::now();
  while (state.watchers_ready + state.watchers_failed < watchers &&
         std::chrono::duration<double>(SteadyClock::now() - setup_start).count() < setup_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double setup_took = std::chrono::duration<double>(SteadyClock::now() - setup_start).count();
  std::fprintf(stderr, "loadgen: %d watchers ready (%d failed) in %.1f s on %d threads\n",
               state.watchers_ready.load(), state.watchers_failed.load(), setup_took,
               watcher_threads);
  ioc.run_for(std::chrono::milliseconds(500));  // let the initial events settle

  uint64_t write_status_ok = 0, write_status_bad = 0;
  std::vector<uint32_t> write_latency;
  auto conn = std::make_shared<Connection>(
      ioc, write_ctx, c.target, [&](const Connection::Item& item, int status, const std::string& body, SteadyTime done) {
        if (status >= 200 && status < 300) {
          ++write_status_ok;
        } else if (write_status_bad++ < 3) {
          std::fprintf(stderr, "loadgen: write -> %d %.300s\n", status, body.c_str());
        }
        write_latency.push_back(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(done - item.due).count()));
      });
  const auto period = std::chrono::nanoseconds(static_cast<int64_t>(1e9 / rate));
  const SteadyTime t0 = SteadyClock::now();
  const SteadyTime end = t0 + std::chrono::duration_cast<SteadyClock::duration>(
                                  std::chrono::duration<double>(duration_s));
  const int64_t wall0 = WallMicros();
  const double cpu0_ms = ProcessCpuMs();
  uint64_t seq = 0;
  net::steady_timer timer(conn->strand());
  std::function<void()> tick = [&] {
    const SteadyTime due = t0 + period * static_cast<int64_t>(seq);
    if (due >= end) return;
    ExpandContext e;
    e.fields = &c.keys[seq % c.keys.size()];
    e.now_us = wall0 + std::chrono::duration_cast<std::chrono::microseconds>(due - t0).count();
    e.seq = seq;
    e.uid_salt = c.uid_salt;
    auto req = Build(c.templates[0], c.target, e);
    // Registered before sending, keyed by the renewTime the events will carry.
    state.writes[MicroTime(e.now_us)].sent = SteadyClock::now();
    conn->Enqueue(Connection::Item{std::move(req), SteadyClock::now(), true});
    ++seq;
    timer.expires_at(t0 + period * static_cast<int64_t>(seq));
    timer.async_wait([&](beast::error_code ec) {
      if (!ec) tick();
    });
  };
  net::post(conn->strand(), tick);
  ioc.run_until(end + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(drain_s)));
  // The client's own CPU over the writes and the drain: on a machine it shares
  // with the server, reading 1,000 TLS streams competes with writing them.
  const double client_cpu_ms = ProcessCpuMs() - cpu0_ms;
  stop_readers = true;
  for (std::thread& t : watcher_pool) t.join();
  shares.clear();
  SSL_CTX_free(ctx);
  for (const Tally& tally : tallies) {
    state.events += tally.events;
    for (auto& [rt, w] : state.writes) {
      auto it = tally.by_renew_time.find(rt);
      if (it == tally.by_renew_time.end()) continue;
      w.received += it->second.received;
      w.last = std::max(w.last, it->second.last);
    }
  }

  // --per-write-out: one line per write, in the order sent: when it was sent
  // (ms after the first), its answer's latency and the last watcher's (ms), and
  // how many watchers saw it; for finding what a slow write had in common.
  if (const std::string& path = f.per_write_out; !path.empty()) {
    std::vector<const Write*> order;
    for (auto& [rt, w] : state.writes) order.push_back(&w);
    std::sort(order.begin(), order.end(), [](const Write* a, const Write* b) { return a->sent < b->sent; });
    if (FILE* out = std::fopen(path.c_str(), "w")) {
      auto ms = [](SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
      for (size_t i = 0; i < order.size(); ++i) {
        const Write& w = *order[i];
        std::fprintf(out, "%zu %.1f %.1f %.1f %d\n", i, ms(w.sent - t0),
                     i < write_latency.size() ? write_latency[i] / 1000.0 : -1.0,
                     w.received > 0 ? ms(w.last - w.sent) : -1.0, w.received);
      }
      std::fclose(out);
    }
  }
  std::vector<uint32_t> last_us;
  uint64_t incomplete = 0, reached = 0;
  for (auto& [rt, w] : state.writes) {
    reached += static_cast<uint64_t>(w.received);
    if (w.received >= state.watchers_ready && state.watchers_ready > 0) {
      last_us.push_back(static_cast<uint32_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(w.last - w.sent).count()));
    } else {
      ++incomplete;
    }
  }
  std::string lat = LatencyJson(last_us);
  std::string wlat = LatencyJson(write_latency);
  std::printf("{\"mode\":\"fanout\",\"watchers\":%d,\"watchers_ready\":%d,\"watchers_failed\":%d,"
              "\"watchers_lost\":%d,\"setup_s\":%.1f,\"writes\":%zu,\"writes_ok\":%" PRIu64 ",\"incomplete\":%" PRIu64
              ",\"events\":%" PRIu64 ",\"deliveries\":%" PRIu64 ",\"client_cpu_ms\":%.0f,"
              "\"watcher_coalesce_us\":%lld,%s,\"write\":{%s}}\n",
              watchers, state.watchers_ready.load(), state.watchers_failed.load(),
              state.watchers_lost.load(), setup_took, state.writes.size(),
              write_status_ok, incomplete, state.events, reached, client_cpu_ms,
              static_cast<long long>(coalesce.count()), lat.c_str(), wlat.c_str());
  return last_us.empty() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "poolcoord-loadgen open|closed|fanout --port=N --template=FILE [--keys=FILE]\n"
      "  [--client-cert=PEM --client-key=PEM] (open, closed)\n"
      "  open:   --rate=R --duration=S --warmup=S --connections=N [--count-substring=S]\n"
      "  closed: --connections=N [--max-seconds=S]\n"
      "  fanout: --watch-template=FILE --watchers=N --rate=R --duration=S";
  const std::string mode = argc > 1 ? argv[1] : "";
  Options options;
  if (mode == "fanout") options.rate = 20;
  poolcoord::base::FlagSet flags;
  AddFlags(&options, flags);
  const bool help = mode == "--help" || mode == "-h";  // no mode: every mode's flags
  poolcoord::bench::ParseFlags(flags, argc, argv, help ? 1 : 2, kUsage);
  try {
    if (mode == "open") return RunOpen(options);
    if (mode == "closed") return RunClosed(options);
    if (mode == "fanout") return RunFanout(options);
  } catch (const std::exception& e) {  // the edge: Asio reports bad addresses by exception
    std::fprintf(stderr, "loadgen: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: %s\n", kUsage);
  return 2;
}
