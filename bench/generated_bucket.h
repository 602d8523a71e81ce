// An S3-compatible endpoint for benchmarks whose one bucket lists `files` empty objects that
// exist nowhere: ListObjectsV2 pages are generated from the continuation token, so a listing of
// 100 M files needs neither a tree on disk nor an index in memory. Keys are
// "d<dir>/sample-<n>.jpg", 1,000 to a directory, zero-padded so that S3's key order is their
// number's. A listing with delimiter '/' gives the directories. Each listing request can be
// made to take a while (`pageLatency`), as a remote store's do, so that what parallel listing
// gains shows, and its pages made to hold fewer keys than asked for (`pageKeys`; S3 may answer
// fewer), so that a listing is bound by its requests rather than by storing what it lists.
// Anonymous requests; any other request gets 404.
#pragma once

#include <civetweb.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

namespace granary::bench {

class GeneratedBucket {
 public:
  static constexpr const char* kBucket = "generated";

  explicit GeneratedBucket(int64_t files,
                           std::chrono::milliseconds pageLatency = std::chrono::milliseconds(0),
                           int64_t pageKeys = 1000, int threads = 64)
      : files_(files), pageLatency_(pageLatency), pageKeys_(pageKeys) {
    mg_init_library(0);
    // Connections kept alive between requests, as S3 keeps them; each response sent as written
    // (Nagle's algorithm held a response's last segment back until the client's delayed
    // acknowledgement, 40 ms, on a kept connection). A connection holds one of `threads` while
    // it is open: as many requests are answered at a time.
    const std::string threadCount = std::to_string(threads);
    const char* options[] = {"listening_ports",
                             "127.0.0.1:0",
                             "num_threads",
                             threadCount.c_str(),
                             "enable_keep_alive",
                             "yes",
                             "tcp_nodelay",
                             "1",
                             nullptr};
    mg_callbacks callbacks{};
    callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
    context_ = mg_start(&callbacks, nullptr, options);
    if (!context_) {
      std::fprintf(stderr, "generated bucket: the web server could not start\n");
      std::exit(1);
    }
    mg_set_request_handler(context_, "/", handle, this);
    mg_server_port ports[1];
    if (mg_get_server_ports(context_, 1, ports) < 1) std::exit(1);
    port_ = ports[0].port;
  }
  ~GeneratedBucket() { mg_stop(context_); }
  GeneratedBucket(const GeneratedBucket&) = delete;
  GeneratedBucket& operator=(const GeneratedBucket&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The listing requests of one whole listing, one part after another.
  int64_t requestsOfOneListing() const { return (files_ + pageKeys_ - 1) / pageKeys_; }
  // Listing requests answered so far.
  int64_t listRequests() const { return listRequests_; }
  // When the last listing request so far was answered.
  std::chrono::steady_clock::time_point lastListAnswered() const {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(lastAnswered_.load()));
  }
  // The key of file `n`.
  static std::string keyOf(int64_t n) {
    char key[64];
    std::snprintf(key, sizeof key, "d%06lld/sample-%09lld.jpg", static_cast<long long>(n / 1000),
                  static_cast<long long>(n));
    return key;
  }

 private:
  // GET /generated?list-type=2&max-keys=K[&continuation-token=N]: files N to N+K-1; with
  // start-after and no token, from the first file after that key (a file's, or a directory's
  // "d<dir>/"). With delimiter=/: directories N to N+K-1.
  static int handle(mg_connection* conn, void* data) {
    auto& self = *static_cast<GeneratedBucket*>(data);
    const mg_request_info* request = mg_get_request_info(conn);
    const std::string query = request->query_string ? request->query_string : "";
    if (std::strcmp(request->local_uri, (std::string("/") + kBucket).c_str()) != 0 ||
        query.find("list-type=2") == std::string::npos) {
      mg_printf(conn, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
      return 404;
    }
    ++self.listRequests_;
    std::this_thread::sleep_for(self.pageLatency_);
    const auto var = [&](const char* name) -> std::optional<std::string> {
      char value[128];
      if (mg_get_var(query.c_str(), query.size(), name, value, sizeof value) <= 0) return {};
      return std::string(value);
    };
    const int64_t pageSize = std::min<int64_t>(
        self.pageKeys_, var("max-keys") ? std::atoll(var("max-keys")->c_str()) : 1000);
    const bool directories = var("delimiter").has_value();
    const int64_t count = directories ? (self.files_ + 999) / 1000 : self.files_;
    int64_t first = 0;
    if (const auto token = var("continuation-token")) {
      first = std::atoll(token->c_str());
    } else if (const auto after = var("start-after"); after && after->starts_with("d")) {
      const size_t sample = after->find("sample-");
      first = sample == std::string::npos ? std::atoll(after->c_str() + 1) * 1000
                                          : std::atoll(after->c_str() + sample + 7) + 1;
    }
    const int64_t end = std::min(count, first + pageSize);
    std::string body =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>generated</Name>"
        "<EncodingType>url</EncodingType><IsTruncated>";
    body += end < count ? "true" : "false";
    body += "</IsTruncated>";
    if (end < count)
      body += "<NextContinuationToken>" + std::to_string(end) + "</NextContinuationToken>";
    for (int64_t n = first; n < end; ++n) {
      if (directories) {
        body += "<CommonPrefixes><Prefix>" + keyOf(n * 1000).substr(0, 8) +
                "</Prefix></CommonPrefixes>";
      } else {
        body += "<Contents><Key>" + keyOf(n) +
                "</Key><Size>0</Size><ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag>"
                "<LastModified>2026-11-27T00:00:00.000Z</LastModified></Contents>";
      }
    }
    body += "</ListBucketResult>";
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: %zu\r\n\r\n",
              body.size());
    mg_write(conn, body.data(), body.size());
    self.lastAnswered_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
    return 200;
  }

  const int64_t files_;
  const std::chrono::milliseconds pageLatency_;
  const int64_t pageKeys_;
  std::atomic<int64_t> listRequests_{0};
  std::atomic<int64_t> lastAnswered_{0};  // steady_clock nanoseconds
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace granary::bench
