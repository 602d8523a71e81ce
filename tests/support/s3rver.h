// s3rver (tests/s3, an S3-compatible server in Node.js) as a child process on loopback, for the
// tests of s3:// origins.
#pragma once

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/url.h"

extern char** environ;

namespace granary::cache {

// s3rver on a loopback port, with an empty store in a temporary directory and one bucket,
// "data".
class S3rver {
 public:
  // Empty `skip` and a server, or the reason there is none: a missing node or s3rver is a
  // reason to skip; anything else is an error.
  static Result<std::unique_ptr<S3rver>> start(const std::string& sourceDir, std::string& skip) {
    const std::string script = sourceDir + "/tests/s3/node_modules/s3rver/bin/s3rver.js";
    if (!std::filesystem::exists(script)) {
      skip = "s3rver is not installed (" + script + "); run scripts/setup.sh";
      return unavailable(skip);
    }
    auto server = std::unique_ptr<S3rver>(new S3rver());
    server->dir_ =
        std::filesystem::temp_directory_path() / ("granary-s3rver-" + std::to_string(::getpid()));
    std::filesystem::remove_all(server->dir_);
    std::filesystem::create_directories(server->dir_);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return unavailable("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, out[1], 2);
    const std::string dir = server->dir_.string();
    // s3rver makes continuation tokens with DES, which OpenSSL 3 keeps in its legacy provider.
    std::vector<std::string> args = {"node",
                                     "--openssl-legacy-provider",
                                     script,
                                     "--directory",
                                     dir,
                                     "--address",
                                     "127.0.0.1",
                                     "--port",
                                     "0",
                                     "--silent",
                                     "--service-endpoint",
                                     "localhost",
                                     "--configure-bucket",
                                     "data"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int spawned =
        ::posix_spawnp(&server->pid_, "node", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (spawned != 0) {
      ::close(out[0]);
      server->pid_ = 0;
      if (spawned == ENOENT) skip = "node is not on PATH; run scripts/setup.sh";
      return unavailable(std::string("cannot start s3rver: ") + std::strerror(spawned));
    }
    server->out_ = out[0];
    // Blocks until s3rver says where it listens, or exits.
    std::string said;
    const std::string marker = "S3rver listening on 127.0.0.1:";
    char c = 0;
    while (::read(server->out_, &c, 1) == 1) {
      said += c;
      const size_t at = said.find(marker);
      if (c == '\n' && at != std::string::npos) {
        server->port_ = std::atoi(said.c_str() + at + marker.size());
        break;
      }
    }
    if (server->port_ == 0) return unavailable("s3rver did not start: " + said);
    server->curl_ = curl_easy_init();
    return server;
  }

  ~S3rver() {
    if (curl_) curl_easy_cleanup(curl_);
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
    std::filesystem::remove_all(dir_);
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string virtualHostEndpoint() const { return "http://s3.localhost:" + std::to_string(port_); }

  // Writes an object of bucket "data" (anonymously: s3rver allows it); returns the HTTP status.
  long put(const std::string& key, const std::string& body) { return request("PUT", key, &body); }
  long remove(const std::string& key) { return request("DELETE", key, nullptr); }

 private:
  S3rver() = default;

  long request(const char* method, const std::string& key, const std::string* body) {
    const std::string url = endpoint() + "/data/" + percentEncode(key, "/");
    curl_easy_reset(curl_);
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, method);
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/octet-stream");
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
    if (body) {
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body->data());
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    curl_easy_setopt(
        curl_, CURLOPT_WRITEFUNCTION,
        +[](char*, size_t size, size_t count, void*) { return size * count; });
    long status = 0;
    if (curl_easy_perform(curl_) == CURLE_OK) {
      curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
    }
    curl_slist_free_all(headers);
    return status;
  }

  std::filesystem::path dir_;
  pid_t pid_ = 0;
  int out_ = -1;
  int port_ = 0;
  CURL* curl_ = nullptr;
};

// One s3rver shared by the tests of a suite: start() in SetUpTestSuite, stop() in
// TearDownTestSuite, and in each test's SetUp:
//   if (!s3_.skip.empty()) GTEST_SKIP() << s3_.skip;
//   ASSERT_NE(s3_.server, nullptr) << s3_.error;
struct SuiteS3rver {
  S3rver* server = nullptr;
  std::string skip;   // why there is none that a test should skip for (node or s3rver missing)
  std::string error;  // or why it failed to start

  void start(const std::string& sourceDir) {
    auto started = S3rver::start(sourceDir, skip);
    if (started.isOk()) {
      server = std::move(*started).release();
    } else if (skip.empty()) {
      error = started.status().toString();
    }
  }
  void stop() {
    delete server;
    server = nullptr;
  }
};

}  // namespace granary::cache
