// Our own request and response types. The transport adapter (apiservice/) fills a
// Request from the wire and writes a Response back; handlers never see Boost.Beast.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/user_info.h"

namespace poolcoord::handlers {

// Header lines in arrival order. Names are lower-cased; repeated lines stay
// separate (kube-apiserver's front proxy sends one X-Remote-Group line per group).
using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // percent-decoded path, no query: "/apis/coordination.pool/v1alpha1/widgets"
  // Query parameters decoded as application/x-www-form-urlencoded ('+' is a
  // space), in order; a key may repeat.
  std::vector<std::pair<std::string, std::string>> query;
  HeaderList headers;
  std::string body;  // the whole body (chunked bodies already joined)
  base::UserInfo user;  // set by authentication before any handler runs

  // First header with this (lower-case) name, or "".
  std::string_view Header(std::string_view lower_name) const;
  // First query value for `key`, or "".
  std::string_view Query(std::string_view key) const;
  bool HasQuery(std::string_view key) const;
  // A boolean query parameter as kube-apiserver converts one
  // (apimachinery's Convert_Slice_string_To_bool): absent is false; "0" and
  // "false" in any case are false; any other value, "" included, is true
  // (so "?watch" and "?watch=yes" watch). Never an error.
  bool QueryBool(std::string_view key) const;
};

// A response body produced as it becomes ready (watch), driven by the transport on
// its I/O threads: no thread per stream, so 10,000 open watches cost memory and
// file descriptors, not 10,000 threads and their context switches.
//
// The transport calls Poll on an I/O thread, never concurrently with itself and
// only after the bytes of the previous Poll were written (that is the
// backpressure: a slow client makes its source fall behind, not the server
// buffer without bound). Poll must not block.
class StreamSource {
 public:
  enum class Step {
    kData,  // *out holds bytes to send; Poll is called again once they are written
    kWait,  // nothing ready: `wake` will be called when something is, and Poll is
            // called again at *wake_at at the latest (bookmarks, timeouts)
    kEnd,   // the body ends after *out (which may be empty)
  };
  using Clock = std::chrono::steady_clock;

  virtual ~StreamSource() = default;
  // Appends what is ready to *out. `wake` may be copied and called once, from any
  // thread, even after the stream ended (it is then a no-op). *wake_at starts
  // as Clock::time_point::max().
  virtual Step Poll(std::string* out, const std::function<void()>& wake,
                    Clock::time_point* wake_at) = 0;
  // The client left, a write failed, or the server began shutting down: Poll is
  // not called again. Releases what the stream holds (a store watch) now rather
  // than when the connection goes.
  virtual void Cancel() {}
};

struct Response {
  int status = 200;
  HeaderList headers;  // Content-Type among them; Content-Length is the transport's
  std::string body;
  // When set, the transport sends status and headers with Transfer-Encoding:
  // chunked, then one chunk per Poll that returned bytes, then the final chunk
  // when the source ends (or the server shuts down). `body` is ignored.
  std::shared_ptr<StreamSource> stream;

  void SetHeader(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

}  // namespace poolcoord::handlers
