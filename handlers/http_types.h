// Our own request and response types. The transport adapter (apiservice/) fills a
// Request from the wire and writes a Response back; handlers never see Boost.Beast.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "election/user_info.h"

namespace poolcoord::handlers {

// Header lines in arrival order. Names are lower-cased; repeated lines stay
// separate (kube-apiserver's front proxy sends one X-Remote-Group line per group).
using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // percent-decoded path, no query: "/apis/coordination.pool/v1alpha1/poolleases"
  // Query parameters decoded as application/x-www-form-urlencoded ('+' is a
  // space), in order; a key may repeat.
  std::vector<std::pair<std::string, std::string>> query;
  HeaderList headers;
  std::string body;  // the whole body (chunked bodies already joined)
  election::UserInfo user;  // set by authentication before any handler runs

  // First header with this (lower-case) name, or "".
  std::string_view Header(std::string_view lower_name) const;
  // First query value for `key`, or "".
  std::string_view Query(std::string_view key) const;
  bool HasQuery(std::string_view key) const;
};

// Writes one chunk of a streamed response body (watch). Write blocks until the
// chunk is handed to the socket and returns false once the peer is gone or the
// server is shutting down; the streamer must then return.
class ChunkWriter {
 public:
  virtual ~ChunkWriter() = default;
  virtual bool Write(std::string_view data) = 0;
  // False once the peer closed or the server began shutting down.
  virtual bool Alive() const = 0;
};

struct Response {
  int status = 200;
  HeaderList headers;  // Content-Type among them; Content-Length is the transport's
  std::string body;
  // When set, the transport sends status and headers with chunked encoding and
  // runs `stream` on a thread of its own (never an I/O thread); the response ends
  // when it returns.
  std::function<void(ChunkWriter&)> stream;

  void SetHeader(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

}  // namespace poolcoord::handlers
