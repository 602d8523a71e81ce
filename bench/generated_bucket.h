// An S3-compatible endpoint for benchmarks whose one bucket lists `files` empty objects that
// exist nowhere: ListObjectsV2 pages are generated from the continuation token, so a listing of
// 100 M files needs neither a tree on disk nor an index in memory. Keys are
// "d<dir>/sample-<n>.jpg", 1,000 to a directory, zero-padded so that S3's key order is their
// number's. Anonymous requests; any other request gets 404.
#pragma once

#include <civetweb.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace granary::bench {

class GeneratedBucket {
 public:
  static constexpr const char* kBucket = "generated";

  explicit GeneratedBucket(int64_t files) : files_(files) {
    mg_init_library(0);
    const char* options[] = {"listening_ports", "127.0.0.1:0", "num_threads", "4", nullptr};
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
  // The key of file `n`.
  static std::string keyOf(int64_t n) {
    char key[64];
    std::snprintf(key, sizeof key, "d%06lld/sample-%09lld.jpg", static_cast<long long>(n / 1000),
                  static_cast<long long>(n));
    return key;
  }

 private:
  // GET /generated?list-type=2&max-keys=K[&continuation-token=N]: files N to N+K-1; with
  // start-after=keyOf(M) and no token, from file M+1.
  static int handle(mg_connection* conn, void* data) {
    const auto& self = *static_cast<GeneratedBucket*>(data);
    const mg_request_info* request = mg_get_request_info(conn);
    const std::string query = request->query_string ? request->query_string : "";
    if (std::strcmp(request->local_uri, (std::string("/") + kBucket).c_str()) != 0 ||
        query.find("list-type=2") == std::string::npos) {
      mg_printf(conn, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
      return 404;
    }
    char value[32];
    char after[128];
    const char* sample = nullptr;
    if (mg_get_var(query.c_str(), query.size(), "start-after", after, sizeof after) > 0)
      sample = std::strstr(after, "sample-");
    const int64_t first =
        mg_get_var(query.c_str(), query.size(), "continuation-token", value, sizeof value) > 0
            ? std::atoll(value)
        : sample ? std::atoll(sample + std::strlen("sample-")) + 1
                 : 0;
    const int64_t pageSize =
        mg_get_var(query.c_str(), query.size(), "max-keys", value, sizeof value) > 0
            ? std::atoll(value)
            : 1000;
    const int64_t end = std::min(self.files_, first + pageSize);
    std::string body =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>generated</Name>"
        "<EncodingType>url</EncodingType><IsTruncated>";
    body += end < self.files_ ? "true" : "false";
    body += "</IsTruncated>";
    if (end < self.files_)
      body += "<NextContinuationToken>" + std::to_string(end) + "</NextContinuationToken>";
    for (int64_t n = first; n < end; ++n) {
      body += "<Contents><Key>" + keyOf(n) +
              "</Key><Size>0</Size><ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag>"
              "<LastModified>2026-11-27T00:00:00.000Z</LastModified></Contents>";
    }
    body += "</ListBucketResult>";
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: %zu\r\n\r\n",
              body.size());
    mg_write(conn, body.data(), body.size());
    return 200;
  }

  const int64_t files_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace granary::bench
