// A real web server (civetweb) serving a directory on loopback, with its directory listings,
// Range requests and ETags, plus faults for origin tests: failing requests with a status, and
// truncating response bodies.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

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
  // The next `count` GETs of a file announce its full length but send only half of it.
  void truncateNext(int count);
  int64_t requests() const;

  struct State;

 private:
  explicit HttpFileServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace granary::testing
