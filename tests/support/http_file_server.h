// A real web server (civetweb) serving a directory on loopback, with its directory listings,
// Range requests and ETags, plus faults for origin tests: failing requests with a status,
// truncating response bodies, and a bandwidth throttle shared by all connections (a response
// starts once its bytes are paid for). Counts the file bytes it serves.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace granary::testing {

class HttpFileServer {
 public:
  static Result<std::unique_ptr<HttpFileServer>> start(const std::filesystem::path& root);
  ~HttpFileServer();

  // http://127.0.0.1:<port>/
  std::string url() const;
  // The next `count` requests get `status` with an empty body.
  void failNext(int count, int status);
  // The next `count` GETs of a file announce the full length of what they asked (the Range, or
  // the whole file) but send only half of it and close the connection.
  void truncateNext(int count);
  // The next `count` ranged GETs of a file answer 206 for the whole range, as civetweb would
  // (its ETag), with a Content-Length and a body of only half of it: a body short but whole.
  void shortenNext(int count);
  // The next `count` requests wait `delay` before any answer (a server that hangs).
  void stallNext(int count, std::chrono::milliseconds delay);
  int64_t requests() const;
  // GETs of a directory (civetweb's listing page of it).
  int64_t directoryListings() const;
  // File bytes sent by GETs (range lengths, or whole files).
  int64_t bytesServed() const;
  // The same, of one file (its path relative to the root).
  int64_t bytesServedOf(const std::string& path) const;
  // One file body a GET sent: when it started (after the throttle let it) and the bytes it
  // wrote, only the half that a truncated or shortened body sends.
  struct Sent {
    std::chrono::steady_clock::time_point at;
    int64_t bytes = 0;
  };
  // Every file body sent so far, in the order they started.
  std::vector<Sent> sent() const;
  // From now on files are served with neither ETag nor Last-Modified (ranges still answered), as
  // some origins do; `afterGet`, if set, is called with the relative path of each file a GET
  // sent, once it is sent (to change the file between two reads, say).
  void withoutVersions(std::function<void(const std::string& path)> afterGet = {});
  // Caps the bytes per second of all GETs together; 0 lifts the cap.
  void throttle(int64_t bytesPerSecond);

  struct State;

 private:
  explicit HttpFileServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace granary::testing
