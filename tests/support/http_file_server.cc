#include "tests/support/http_file_server.h"

#include <civetweb.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

namespace granary::testing {

struct HttpFileServer::State {
  std::filesystem::path root;
  mg_context* context = nullptr;
  int port = 0;
  std::mutex mutex;  // guards the fault counters
  int failCount = 0;
  int failStatus = 500;
  int truncateCount = 0;
  int shortenCount = 0;
  int stallCount = 0;
  std::chrono::milliseconds stall{0};
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> directoryListings{0};
  bool unversioned = false;
  std::function<void(const std::string&)> afterGet;
  int64_t rate = 0;  // bytes per second; 0 unlimited
  std::chrono::steady_clock::time_point paidUntil{};
  std::vector<HttpFileServer::Sent> sent;      // guarded by mutex
  std::map<std::string, int64_t> bytesByPath;  // guarded by mutex
};

namespace {

// A 206 for the Range asked, headed as civetweb heads it (its ETag: mtime and size), whose
// Content-Length and body are only the first half of the range.
int sendShortRange(mg_connection* conn, const std::filesystem::path& file) {
  struct stat st {};
  ::stat(file.c_str(), &st);
  long long first = 0, last = -1;
  std::sscanf(mg_get_header(conn, "Range"), "bytes=%lld-%lld", &first, &last);
  if (last < 0 || last >= st.st_size) last = st.st_size - 1;
  std::ifstream in(file, std::ios::binary);
  std::string body(static_cast<size_t>((last - first + 1) / 2), '\0');
  in.seekg(first);
  in.read(body.data(), static_cast<std::streamsize>(body.size()));
  mg_printf(conn,
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %lld-%lld/%lld\r\n"
            "ETag: \"%lx.%lld\"\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
            first, last, static_cast<long long>(st.st_size),
            static_cast<unsigned long>(st.st_mtime), static_cast<long long>(st.st_size),
            body.size());
  mg_write(conn, body.data(), body.size());
  return 206;
}

// `file`, or the part its Range asks, headed with neither ETag nor Last-Modified; the body
// announced whole but, with `half`, only its first half sent before the connection closes (a
// transfer cut short). HEAD sends no body.
int sendFile(mg_connection* conn, const std::filesystem::path& file, bool head, bool half) {
  std::ifstream in(file, std::ios::binary);
  const std::string body(std::istreambuf_iterator<char>(in), {});
  const auto size = static_cast<long long>(body.size());
  const auto send = [&](long long first, long long length) {
    if (!head) mg_write(conn, body.data() + first, static_cast<size_t>(half ? length / 2 : length));
  };
  const char* range = mg_get_header(conn, "Range");
  long long first = 0, last = -1;
  if (range == nullptr || std::sscanf(range, "bytes=%lld-%lld", &first, &last) < 1) {
    mg_printf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\nConnection: close\r\n\r\n", size);
    send(0, size);
    return 200;
  }
  if (first >= size) {
    mg_printf(conn,
              "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%lld\r\n"
              "Content-Length: 0\r\nConnection: close\r\n\r\n",
              size);
    return 416;
  }
  if (last < 0 || last >= size) last = size - 1;
  mg_printf(conn,
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %lld-%lld/%lld\r\n"
            "Content-Length: %lld\r\nConnection: close\r\n\r\n",
            first, last, size, last - first + 1);
  send(first, last - first + 1);
  return 206;
}

// The bytes a GET of `file` sends: the Range's length, or the whole file.
int64_t bytesOf(mg_connection* conn, const std::filesystem::path& file) {
  std::error_code error;
  const auto size = static_cast<int64_t>(std::filesystem::file_size(file, error));
  if (error) return 0;
  const char* range = mg_get_header(conn, "Range");
  long long first = 0, last = -1;
  if (range != nullptr && std::sscanf(range, "bytes=%lld-%lld", &first, &last) >= 1) {
    if (last < 0 || last >= size) last = size - 1;
    return first > last ? 0 : last - first + 1;
  }
  return size;
}

int handle(mg_connection* conn, void* data) {
  auto& s = *static_cast<HttpFileServer::State*>(data);
  ++s.requests;
  const mg_request_info* request = mg_get_request_info(conn);
  int status = 0;
  bool truncate = false, shorten = false;
  std::chrono::milliseconds stall{0};
  {
    std::lock_guard lock(s.mutex);
    if (s.stallCount > 0) --s.stallCount, stall = s.stall;
    if (s.failCount > 0) {
      --s.failCount;
      status = s.failStatus;
    } else if (s.truncateCount > 0 && std::string(request->request_method) == "GET") {
      const std::filesystem::path file = s.root / std::string(request->local_uri + 1);
      if (std::filesystem::is_regular_file(file)) {
        --s.truncateCount;
        truncate = true;
      }
    } else if (s.shortenCount > 0 && std::string(request->request_method) == "GET" &&
               mg_get_header(conn, "Range") != nullptr) {
      const std::filesystem::path file = s.root / std::string(request->local_uri + 1);
      if (std::filesystem::is_regular_file(file)) {
        --s.shortenCount;
        shorten = true;
      }
    }
  }
  std::this_thread::sleep_for(stall);
  if (!status && std::strcmp(request->request_method, "GET") == 0) {
    const std::filesystem::path file = s.root / std::string(request->local_uri + 1);
    if (std::filesystem::is_directory(file)) ++s.directoryListings;
    if (std::filesystem::is_regular_file(file)) {
      const int64_t bytes = bytesOf(conn, file);
      s.bytes += bytes;
      std::chrono::steady_clock::time_point start;
      {
        std::lock_guard lock(s.mutex);
        if (s.rate > 0) {
          const auto now = std::chrono::steady_clock::now();
          s.paidUntil =
              std::max(s.paidUntil, now) + std::chrono::nanoseconds(bytes * 1'000'000'000 / s.rate);
          start = s.paidUntil;
        }
      }
      std::this_thread::sleep_until(start);
      std::lock_guard lock(s.mutex);
      s.bytesByPath[std::string(request->local_uri + 1)] += bytes;
      // A truncated or shortened body sends half of what it announces.
      s.sent.push_back({std::chrono::steady_clock::now(), truncate || shorten ? bytes / 2 : bytes});
    }
  }
  if (status) {
    mg_printf(conn, "HTTP/1.1 %d Injected\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
              status);
    return status;
  }
  if (shorten) return sendShortRange(conn, s.root / std::string(request->local_uri + 1));
  if (truncate) return sendFile(conn, s.root / std::string(request->local_uri + 1), false, true);
  const std::string method = request->request_method;
  const std::string path = request->local_uri + 1;
  std::function<void(const std::string&)> afterGet;
  bool unversioned;
  {
    std::lock_guard lock(s.mutex);
    unversioned = s.unversioned;
    afterGet = s.afterGet;
  }
  if (unversioned && (method == "GET" || method == "HEAD") &&
      std::filesystem::is_regular_file(s.root / path)) {
    const int sent = sendFile(conn, s.root / path, method == "HEAD", false);
    if (method == "GET" && afterGet) afterGet(path);
    return sent;
  }
  return 0;  // civetweb serves the file or the listing itself
}

}  // namespace

HttpFileServer::HttpFileServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

HttpFileServer::~HttpFileServer() { mg_stop(state_->context); }

Result<std::unique_ptr<HttpFileServer>> HttpFileServer::start(const std::filesystem::path& root) {
  auto state = std::make_unique<State>();
  state->root = root;
  mg_init_library(0);
  const std::string documentRoot = root.string();
  const char* options[] = {"listening_ports",
                           "127.0.0.1:0",
                           "document_root",
                           documentRoot.c_str(),
                           "enable_directory_listing",
                           "yes",
                           "num_threads",
                           "64",
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  state->context = mg_start(&callbacks, nullptr, options);
  if (!state->context) return unavailable("the test web server could not start");
  mg_set_request_handler(state->context, "/", handle, state.get());
  mg_server_port ports[1];
  if (mg_get_server_ports(state->context, 1, ports) < 1) return unavailable("no port");
  state->port = ports[0].port;
  return std::unique_ptr<HttpFileServer>(new HttpFileServer(std::move(state)));
}

std::string HttpFileServer::url() const {
  return "http://127.0.0.1:" + std::to_string(state_->port) + "/";
}

void HttpFileServer::failNext(int count, int status) {
  std::lock_guard lock(state_->mutex);
  state_->failCount = count;
  state_->failStatus = status;
}

void HttpFileServer::stallNext(int count, std::chrono::milliseconds delay) {
  std::lock_guard lock(state_->mutex);
  state_->stallCount = count;
  state_->stall = delay;
}

void HttpFileServer::shortenNext(int count) {
  std::lock_guard lock(state_->mutex);
  state_->shortenCount = count;
}

void HttpFileServer::withoutVersions(std::function<void(const std::string& path)> afterGet) {
  std::lock_guard lock(state_->mutex);
  state_->unversioned = true;
  state_->afterGet = std::move(afterGet);
}

void HttpFileServer::truncateNext(int count) {
  std::lock_guard lock(state_->mutex);
  state_->truncateCount = count;
}

int64_t HttpFileServer::requests() const { return state_->requests; }

int64_t HttpFileServer::directoryListings() const { return state_->directoryListings; }

int64_t HttpFileServer::bytesServed() const { return state_->bytes; }

int64_t HttpFileServer::bytesServedOf(const std::string& path) const {
  std::lock_guard lock(state_->mutex);
  const auto it = state_->bytesByPath.find(path);
  return it == state_->bytesByPath.end() ? 0 : it->second;
}

std::vector<HttpFileServer::Sent> HttpFileServer::sent() const {
  std::lock_guard lock(state_->mutex);
  return state_->sent;
}

void HttpFileServer::throttle(int64_t bytesPerSecond) {
  std::lock_guard lock(state_->mutex);
  state_->rate = bytesPerSecond;
}

}  // namespace granary::testing
