// The s3:// origin.
// - Signing: libcurl signs; a loopback server records the exact request it sent, and botocore
//   (tests/engine/origin/sigv4_oracle.py) recomputes the signature independently. One vector of
//   AWS's SigV4 test suite is checked as well.
// - Protocol: against s3rver (tests/s3, an S3-compatible server in Node.js) on loopback:
//   pagination, prefixes, nested and odd keys, ranged reads, changed and missing objects, path-
//   and virtual-host-style addressing, refused credentials.
// - Faults (5xx, truncated bodies, S3 error documents) from the loopback server.
// - The pure pieces: URI parsing, options, the XML of ListObjectsV2.
#include "engine/origin/s3_origin.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/url.h"
#include "engine/origin/curl_transfer.h"
#include "tests/support/s3rver.h"

extern char** environ;

namespace granary::cache {
namespace {

const std::string kSourceDir = GRANARY_SOURCE_DIR;

// ---- A loopback HTTP server that answers from a script and records every request ----

// Answers each request with what the handler returns (one request per connection) and records
// the request exactly as received: method, target, every header with its name as sent. For what
// a real store cannot do on demand (faults) or tell (the headers libcurl signed).
class ScriptedServer {
 public:
  struct Request {
    std::string method;
    std::string target;  // path and query, as sent
    std::vector<std::pair<std::string, std::string>> headers;

    // The first header named `name` (case-insensitive); "" when absent.
    std::string header(std::string_view name) const {
      for (const auto& [n, v] : headers) {
        if (std::equal(n.begin(), n.end(), name.begin(), name.end(),
                       [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
          return v;
        }
      }
      return "";
    }
  };
  struct Reply {
    int status = 200;
    std::vector<std::string> headers;  // extra "Name: value" lines
    std::string body;
    size_t sendBytes = std::string::npos;  // fewer than body.size(): announce all, send less
  };
  using Handler = std::function<Reply(const Request&)>;

  explicit ScriptedServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    auto* generic = reinterpret_cast<sockaddr*>(&address);
    if (::bind(fd_, generic, size) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, generic, &size) != 0) {
      ADD_FAILURE() << "the scripted server cannot listen: " << std::strerror(errno);
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
    ::close(fd_);
  }

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Request> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    while (!stopping_) {
      const int connection = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (connection < 0) continue;  // shut down (stopping_), or a transient accept error
      answer(connection);
      ::close(connection);
    }
  }

  void answer(int connection) {
    std::string data;
    char buffer[4096];
    while (data.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(connection, buffer, sizeof(buffer), 0);
      if (n <= 0) return;
      data.append(buffer, static_cast<size_t>(n));
    }
    Request request;
    size_t lineStart = 0;
    for (bool first = true;; first = false) {
      const size_t lineEnd = data.find("\r\n", lineStart);
      const std::string line = data.substr(lineStart, lineEnd - lineStart);
      lineStart = lineEnd + 2;
      if (line.empty()) break;
      if (first) {
        const size_t space = line.find(' ');
        request.method = line.substr(0, space);
        request.target = line.substr(space + 1, line.rfind(' ') - space - 1);
        continue;
      }
      const size_t colon = line.find(':');
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      request.headers.emplace_back(line.substr(0, colon), value);
    }
    Reply reply;
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
      reply = handler_(request);
    }
    std::string out = "HTTP/1.1 " + std::to_string(reply.status) +
                      " Scripted\r\nContent-Length: " + std::to_string(reply.body.size()) +
                      "\r\nConnection: close\r\n";
    for (const auto& line : reply.headers) out += line + "\r\n";
    out += "\r\n" + reply.body.substr(0, std::min(reply.sendBytes, reply.body.size()));
    for (size_t sent = 0; sent < out.size();) {
      const ssize_t n = ::send(connection, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;  // guards requests_ and calls of handler_
  std::vector<Request> requests_;
  std::thread thread_;
};

// ---- botocore as the signature oracle ----

struct Signer {
  std::string accessKeyId;
  std::string secretAccessKey;
  std::string sessionToken;
  std::string region = "us-east-1";
  std::string service = "s3";
};

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

struct OracleAnswer {
  int exitCode = -1;
  std::string output;  // the Authorization header botocore computes, or why it refused
};

// Runs tests/engine/origin/sigv4_oracle.py with the system Python (where Debian's python3-botocore
// lives) on a recorded request.
OracleAnswer botocoreAuthorization(const ScriptedServer::Request& request, const Signer& signer) {
  std::string json = "{\"method\":" + jsonString(request.method) +
                     ",\"target\":" + jsonString(request.target) + ",\"headers\":[";
  for (size_t i = 0; i < request.headers.size(); ++i) {
    json += (i ? ",[" : "[") + jsonString(request.headers[i].first) + "," +
            jsonString(request.headers[i].second) + "]";
  }
  json += "],\"accessKeyId\":" + jsonString(signer.accessKeyId) +
          ",\"secretAccessKey\":" + jsonString(signer.secretAccessKey) +
          ",\"sessionToken\":" + jsonString(signer.sessionToken) +
          ",\"region\":" + jsonString(signer.region) +
          ",\"service\":" + jsonString(signer.service) + "}";
  static std::atomic<int> counter{0};
  const auto input =
      std::filesystem::temp_directory_path() /
      ("granary-sigv4-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json");
  std::ofstream(input) << json;
  const std::string command = "/usr/bin/python3 '" + kSourceDir +
                              "/tests/engine/origin/sigv4_oracle.py' < '" + input.string() +
                              "' 2>&1";
  OracleAnswer answer;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return answer;
  char buffer[512];
  while (const size_t n = std::fread(buffer, 1, sizeof(buffer), pipe))
    answer.output.append(buffer, n);
  const int status = ::pclose(pipe);
  answer.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  while (!answer.output.empty() && answer.output.back() == '\n') answer.output.pop_back();
  std::filesystem::remove(input);
  return answer;
}

// The request's Authorization header equals the one botocore computes for it.
void expectSignedLikeBotocore(const ScriptedServer::Request& request, const Signer& signer) {
  const OracleAnswer oracle = botocoreAuthorization(request, signer);
  ASSERT_EQ(oracle.exitCode, 0) << "sigv4_oracle.py failed (is python3-botocore installed? run "
                                   "scripts/setup.sh): "
                                << oracle.output;
  EXPECT_EQ(request.header("Authorization"), oracle.output)
      << request.method << " " << request.target;
}

std::string listPage(const std::vector<std::pair<std::string, int>>& keys, bool truncated,
                     const std::string& nextToken) {
  std::string xml =
      R"(<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name>)";
  xml += "<IsTruncated>" + std::string(truncated ? "true" : "false") + "</IsTruncated>";
  if (!nextToken.empty()) xml += "<NextContinuationToken>" + nextToken + "</NextContinuationToken>";
  for (const auto& [key, size] : keys) {
    xml += "<Contents><Key>" + key + "</Key><LastModified>2024-05-06T07:08:09.123Z</LastModified>" +
           "<ETag>&quot;etag-" + std::to_string(size) + "&quot;</ETag><Size>" +
           std::to_string(size) + "</Size><StorageClass>STANDARD</StorageClass></Contents>";
  }
  return xml + "</ListBucketResult>";
}

std::vector<OriginObject> listAll(Origin& origin, int* batches = nullptr) {
  std::vector<OriginObject> all;
  const Status s = origin.list([&](std::vector<OriginObject>&& batch) {
    if (batches) ++*batches;
    for (auto& o : batch) all.push_back(std::move(o));
    return Status::ok();
  });
  EXPECT_TRUE(s.isOk()) << s;
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return all;
}

const Signer kSigner{.accessKeyId = "AKIDGRANARYTEST",
                     .secretAccessKey = "granary/test+secret:key",
                     .sessionToken = "FwoGZXIvYXdzEJr//////////wEaDLtest+token/with=chars"};

S3OriginOptions signedOptions(const std::string& endpoint, bool withToken) {
  return {.bucket = "bucket",
          .prefix = "my data/ünï+code=x/",
          .endpoint = endpoint,
          .region = "eu-west-3",
          .accessKeyId = Secret(kSigner.accessKeyId),
          .secretAccessKey = Secret(kSigner.secretAccessKey),
          .sessionToken = Secret(withToken ? kSigner.sessionToken : ""),
          .maxAttempts = 1};
}

// ---- Signing ----

// AWS's SigV4 test suite, vector "get-vanilla": libcurl takes the caller's X-Amz-Date and Host,
// so the published signature is reproducible. (libcurl also sends its own X-Amz-Date line, with
// the same value; the suite's request has one, which does not change what is signed.)
TEST(S3SigV4Test, ReproducesTheAwsTestSuiteVectorGetVanilla) {
  ScriptedServer server([](const auto&) { return ScriptedServer::Reply{}; });
  CurlTransfer transfer({});
  HttpRequest request{.url = server.endpoint() + "/",
                      .headers = {"Host: example.amazonaws.com", "X-Amz-Date: 20150830T123600Z"},
                      .awsSigV4 = "aws:amz:us-east-1:service",
                      .username = Secret("AKIDEXAMPLE"),
                      .password = Secret("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")};
  ASSERT_TRUE(transfer.send(request).isOk());
  ASSERT_EQ(server.requests().size(), 1u);
  const auto sent = server.requests()[0];
  EXPECT_EQ(sent.header("Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  // The oracle agrees on the same vector, so it is checked against AWS's numbers too.
  expectSignedLikeBotocore(sent, {.accessKeyId = "AKIDEXAMPLE",
                                  .secretAccessKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                  .service = "service"});
}

// Paginated listing: odd characters in the prefix and in the continuation token exercise the
// canonical query string (libcurl 7.88 signs the query as written, so the origin must write it
// sorted and encoded the way SigV4 canonicalises it).
TEST(S3SigV4Test, ListRequestsAreSignedLikeBotocore) {
  ScriptedServer server([](const ScriptedServer::Request& r) {
    ScriptedServer::Reply reply;
    if (r.target.find("continuation-token=") == std::string::npos) {
      reply.body = listPage({{"my data/ünï+code=x/a", 1}}, true, "1/a+b=c d&amp;e");
    } else {
      reply.body = listPage({{"my data/ünï+code=x/b", 2}}, false, "");
    }
    return reply;
  });
  auto origin = makeS3Origin(signedOptions(server.endpoint(), /*withToken=*/false));
  ASSERT_TRUE(origin.isOk()) << origin.status();
  const auto all = listAll(**origin);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].path, "a");
  EXPECT_EQ(all[1].path, "b");

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target,
            "/bucket?encoding-type=url&list-type=2&max-keys=1000&prefix=my%20data%2F%C3%BCn%C3%AF%"
            "2Bcode%3Dx%2F");
  EXPECT_NE(requests[1].target.find("continuation-token=1%2Fa%2Bb%3Dc%20d%26e&"), std::string::npos)
      << requests[1].target;
  for (const auto& request : requests) {
    EXPECT_EQ(request.header("x-amz-security-token"), "");
    EXPECT_NE(request.header("Authorization").find("/eu-west-3/s3/aws4_request"),
              std::string::npos);
    expectSignedLikeBotocore(request, {.accessKeyId = kSigner.accessKeyId,
                                       .secretAccessKey = kSigner.secretAccessKey,
                                       .region = "eu-west-3"});
  }
}

// A ranged, version-pinned GetObject with temporary credentials, for a key whose segments need
// encoding (and one, "..", that must reach the store as written).
TEST(S3SigV4Test, GetObjectWithSessionTokenIsSignedLikeBotocore) {
  ScriptedServer server([](const auto&) {
    return ScriptedServer::Reply{
        .status = 206, .headers = {"ETag: \"v1\"", "Content-Range: bytes 2-5/10"}, .body = "2345"};
  });
  auto origin = makeS3Origin(signedOptions(server.endpoint(), /*withToken=*/true));
  ASSERT_TRUE(origin.isOk()) << origin.status();
  auto bytes = (*origin)->read("x/../a b~(1)*!'.bin", 2, 4, "\"v1\"");
  ASSERT_TRUE(bytes.isOk()) << bytes.status();
  EXPECT_EQ(*bytes, "2345");

  ASSERT_EQ(server.requests().size(), 1u);
  const auto sent = server.requests()[0];
  EXPECT_EQ(sent.target,
            "/bucket/my%20data/%C3%BCn%C3%AF%2Bcode%3Dx/x/../a%20b~%281%29%2A%21%27.bin");
  EXPECT_EQ(sent.header("Range"), "bytes=2-5");
  EXPECT_EQ(sent.header("If-Match"), "\"v1\"");
  EXPECT_EQ(sent.header("x-amz-security-token"), kSigner.sessionToken);
  EXPECT_NE(sent.header("Authorization").find("if-match;"), std::string::npos);
  expectSignedLikeBotocore(sent, {.accessKeyId = kSigner.accessKeyId,
                                  .secretAccessKey = kSigner.secretAccessKey,
                                  .sessionToken = kSigner.sessionToken,
                                  .region = "eu-west-3"});
}

// Virtual-host addressing puts the bucket in the host name (*.localhost reaches loopback).
TEST(S3SigV4Test, VirtualHostAddressingIsSignedLikeBotocore) {
  ScriptedServer server([](const auto&) {
    return ScriptedServer::Reply{.body = listPage({{"my data/ünï+code=x/k", 3}}, false, "")};
  });
  auto options = signedOptions("http://s3.localhost:" + std::to_string(server.port()), false);
  options.pathStyle = false;
  auto origin = makeS3Origin(options);
  ASSERT_TRUE(origin.isOk()) << origin.status();
  ASSERT_EQ(listAll(**origin).size(), 1u);
  ASSERT_EQ(server.requests().size(), 1u);
  const auto sent = server.requests()[0];
  EXPECT_EQ(sent.header("Host"), "bucket.s3.localhost:" + std::to_string(server.port()));
  EXPECT_EQ(sent.target.rfind("/?encoding-type=url&list-type=2", 0), 0u) << sent.target;
  expectSignedLikeBotocore(sent, {.accessKeyId = kSigner.accessKeyId,
                                  .secretAccessKey = kSigner.secretAccessKey,
                                  .region = "eu-west-3"});
}

TEST(S3SigV4Test, RequestsWithoutCredentialsAreAnonymous) {
  ScriptedServer server([](const auto&) {
    return ScriptedServer::Reply{
        .status = 206, .headers = {"ETag: \"v1\"", "Content-Range: bytes 0-1/2"}, .body = "ab"};
  });
  auto origin = makeS3Origin({.bucket = "public-data", .endpoint = server.endpoint()});
  ASSERT_TRUE(origin.isOk()) << origin.status();
  ASSERT_TRUE((*origin)->read("k", 0, 2, "\"v1\"").isOk());
  ASSERT_EQ(server.requests().size(), 1u);
  const auto sent = server.requests()[0];
  for (const auto& [name, value] : sent.headers) {
    EXPECT_NE(name, "Authorization");
    EXPECT_NE(name.rfind("x-amz-", 0), 0u) << name;
  }
}

// ---- Faults from the loopback server ----

class S3FaultTest : public ::testing::Test {
 protected:
  // Replies with `script[i]` to the i-th request, and the last entry after that.
  void serve(std::vector<ScriptedServer::Reply> script) {
    server_.reset();
    script_ = std::move(script);
    served_ = 0;
    server_ = std::make_unique<ScriptedServer>([this](const auto&) {
      const size_t i = std::min(served_++, script_.size() - 1);
      return script_[i];
    });
  }
  std::unique_ptr<Origin> origin(int maxAttempts = 4) {
    auto o = makeS3Origin({.bucket = "the-bucket",
                           .prefix = "p/",
                           .endpoint = server_->endpoint(),
                           .accessKeyId = Secret("AKIDFAULTS"),
                           .secretAccessKey = Secret("do-not-print-me"),
                           .maxAttempts = maxAttempts,
                           .retryDelay = std::chrono::milliseconds(1)});
    EXPECT_TRUE(o.isOk()) << o.status();
    return o.isOk() ? std::move(*o) : nullptr;
  }
  static ScriptedServer::Reply error(int status, const std::string& code) {
    return {.status = status,
            .body = "<?xml version=\"1.0\"?><Error><Code>" + code +
                    "</Code><Message>m</Message><AWSAccessKeyId>AKIDFAULTS</AWSAccessKeyId>"
                    "</Error>"};
  }
  // Bytes from offset 0 of a 100-byte object.
  static ScriptedServer::Reply part(const std::string& body, const std::string& etag = "\"v1\"") {
    return {.status = 206,
            .headers = {"ETag: " + etag,
                        "Content-Range: bytes 0-" + std::to_string(body.size() - 1) + "/100"},
            .body = body};
  }

  std::vector<ScriptedServer::Reply> script_;
  std::atomic<size_t> served_{0};
  std::unique_ptr<ScriptedServer> server_;
};

TEST_F(S3FaultTest, RetriesServerErrorsThenSucceeds) {
  serve({error(503, "SlowDown"), error(500, "InternalError"), part("0123")});
  auto bytes = origin()->read("f", 0, 4, "\"v1\"");
  ASSERT_TRUE(bytes.isOk()) << bytes.status();
  EXPECT_EQ(*bytes, "0123");
  EXPECT_EQ(server_->requests().size(), 3u);
}

TEST_F(S3FaultTest, RetriesTruncatedBodiesNeverReturnsThem) {
  auto truncated = part("0123456789");
  truncated.sendBytes = 5;
  serve({truncated, part("0123456789")});
  auto o = origin();
  std::vector<int64_t> gated;
  o->setRetryGate([&gated](int64_t bytes) { gated.push_back(bytes); });
  auto bytes = o->read("f", 0, 10, "\"v1\"");
  ASSERT_TRUE(bytes.isOk()) << bytes.status();
  EXPECT_EQ(*bytes, "0123456789");
  EXPECT_EQ(server_->requests().size(), 2u);
  EXPECT_EQ(gated, std::vector<int64_t>{10}) << "the range asked for again, for the limit";
}

TEST_F(S3FaultTest, GivesUpAfterMaxAttemptsAsUnavailable) {
  serve({error(500, "InternalError")});
  EXPECT_EQ(origin(3)->read("f", 0, 4, "\"v1\"").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server_->requests().size(), 3u);
}

TEST_F(S3FaultTest, MapsS3ErrorsToStatusCodes) {
  serve({error(412, "PreconditionFailed")});
  EXPECT_EQ(origin()->read("f", 0, 4, "\"v1\"").status().code(), StatusCode::kFailedPrecondition);
  serve({error(404, "NoSuchKey")});
  EXPECT_EQ(origin()->read("f", 0, 4, "\"v1\"").status().code(), StatusCode::kNotFound);
  serve({error(404, "NoSuchBucket")});
  const Status noBucket = origin()->list([](auto&&) { return Status::ok(); });
  EXPECT_EQ(noBucket.code(), StatusCode::kNotFound);
  EXPECT_NE(noBucket.message().find("the-bucket"), std::string::npos) << noBucket;
  serve({error(301, "PermanentRedirect")});
  EXPECT_EQ(origin()->list([](auto&&) { return Status::ok(); }).code(),
            StatusCode::kInvalidArgument);
  serve({error(400, "AuthorizationHeaderMalformed")});
  const Status region = origin()->read("f", 0, 4, "").status();
  EXPECT_EQ(region.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(region.message().find("us-east-1"), std::string::npos) << region;
}

TEST_F(S3FaultTest, AccessDeniedNamesTheBucketNeverTheCredentials) {
  serve({error(403, "AccessDenied")});
  for (const Status& s : {origin()->read("f", 0, 4, "\"v1\"").status(),
                          origin()->list([](auto&&) { return Status::ok(); })}) {
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
    EXPECT_NE(s.message().find("\"the-bucket\""), std::string::npos) << s;
    EXPECT_EQ(s.message().find("AKIDFAULTS"), std::string::npos) << s;
    EXPECT_EQ(s.message().find("do-not-print-me"), std::string::npos) << s;
  }
}

// A store that ignores If-Match still gives the object's current ETag away.
TEST_F(S3FaultTest, AnotherETagIsAChangedObject) {
  serve({part("0123", "\"v2\"")});
  EXPECT_EQ(origin()->read("f", 0, 4, "\"v1\"").status().code(), StatusCode::kFailedPrecondition);
}

// A part longer than asked is cut to size; a part from elsewhere is refused.
TEST_F(S3FaultTest, KeepsOnlyTheRangeAskedFor) {
  serve({part("0123456789")});
  EXPECT_EQ(*origin()->read("f", 0, 4, "\"v1\""), "0123");
  serve({part("0123456789")});
  EXPECT_EQ(origin()->read("f", 3, 4, "\"v1\"").status().code(), StatusCode::kUnavailable);
}

TEST_F(S3FaultTest, BadListingsAreUnavailableNotLoops) {
  serve({{.body = "<html><body>gateway says hello</body></html>"}});
  EXPECT_EQ(origin()->list([](auto&&) { return Status::ok(); }).code(), StatusCode::kUnavailable);
  serve({{.body = listPage({{"p/a", 1}}, true, "")}});
  EXPECT_EQ(origin()->list([](auto&&) { return Status::ok(); }).code(), StatusCode::kUnavailable);
  EXPECT_EQ(server_->requests().size(), 1u);
  serve({{.body = listPage({{"elsewhere/a", 1}}, false, "")}});
  EXPECT_EQ(origin()->list([](auto&&) { return Status::ok(); }).code(), StatusCode::kUnavailable);
}

TEST_F(S3FaultTest, ListingStopsAtTheFirstErrorOfEach) {
  serve(
      {{.body = listPage({{"p/a", 1}}, true, "t2")}, {.body = listPage({{"p/b", 1}}, false, "")}});
  const Status s = origin()->list([](auto&&) { return conflict("stop here"); });
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(server_->requests().size(), 1u);
}

// split() reads the delimited listing page after page (what s3rver cannot show: it answers one
// page), asking with delimiter=/ under the prefix; a directory outside the prefix is refused.
TEST_F(S3FaultTest, SplitsAtDirectoriesListedOverPages) {
  const auto page = [](std::vector<std::string> prefixes, const std::string& next) {
    std::string body = "<ListBucketResult><IsTruncated>" +
                       std::string(next.empty() ? "false" : "true") + "</IsTruncated>";
    if (!next.empty()) body += "<NextContinuationToken>" + next + "</NextContinuationToken>";
    for (const auto& prefix : prefixes)
      body += "<CommonPrefixes><Prefix>" + prefix + "</Prefix></CommonPrefixes>";
    return ScriptedServer::Reply{.body = body + "</ListBucketResult>"};
  };
  serve({page({"p/a/", "p/b/"}, "t2"), page({"p/c/", "p/d/"}, "")});
  const auto parts = origin()->split(2);
  ASSERT_TRUE(parts.isOk()) << parts.status();
  EXPECT_EQ(*parts, (std::vector<KeyRange>{{.after = "", .through = "c/"}, {.after = "c/"}}));
  ASSERT_EQ(server_->requests().size(), 2u);
  EXPECT_NE(server_->requests()[0].target.find("delimiter=%2F"), std::string::npos)
      << server_->requests()[0].target;
  EXPECT_NE(server_->requests()[1].target.find("continuation-token=t2"), std::string::npos);

  serve({page({"p/a/", "elsewhere/"}, "")});
  EXPECT_EQ(origin()->split(2).status().code(), StatusCode::kUnavailable);
}

// ---- Against s3rver ----

class S3ProtocolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { s3_.start(kSourceDir); }
  static void TearDownTestSuite() { s3_.stop(); }
  void SetUp() override {
    if (!s3_.skip.empty()) GTEST_SKIP() << s3_.skip;
    ASSERT_NE(s3_.server, nullptr) << s3_.error;
  }

  S3rver& s3() { return *s3_.server; }
  void put(const std::string& key, const std::string& body) {
    ASSERT_EQ(s3_.server->put(key, body), 200) << key;
  }
  std::unique_ptr<Origin> origin(const std::string& prefix, int pageSize = 1000) {
    auto o = makeS3Origin({.bucket = "data",
                           .prefix = prefix,
                           .endpoint = s3_.server->endpoint(),
                           .accessKeyId = Secret("S3RVER"),  // s3rver's built-in account
                           .secretAccessKey = Secret("S3RVER"),
                           .retryDelay = std::chrono::milliseconds(1),
                           .listPageSize = pageSize});
    EXPECT_TRUE(o.isOk()) << o.status();
    return o.isOk() ? std::move(*o) : nullptr;
  }

  static inline SuiteS3rver s3_;
};

TEST_F(S3ProtocolTest, ListsPagesUnderThePrefixWithNestedAndOddKeys) {
  put("list/", "");  // directory markers, as consoles make them
  put("list/empty-dir/", "");
  put("list/top.txt", "top");
  put("list/a/b/c/deep.bin", std::string(1000, 'd'));
  put("list/with space & <angle> \"quote\" 'apos'.txt", "odd");
  put("list/ünïcödé+plus=eq%pct.txt", "unicode");
  for (int i = 0; i < 20; ++i) put("list/many/f" + std::to_string(100 + i), std::to_string(i));
  put("listing-sibling/outside.txt", "no");  // shares the characters, not the prefix
  put("other/outside.txt", "no");

  int batches = 0;
  const auto all = listAll(*origin("list/", /*pageSize=*/5), &batches);
  ASSERT_EQ(all.size(), 24u);
  EXPECT_GE(batches, 5) << "26 keys in pages of 5";
  EXPECT_EQ(all[0].path, "a/b/c/deep.bin");
  EXPECT_EQ(all[0].size, 1000);
  EXPECT_EQ(all[1].path, "many/f100");
  EXPECT_EQ(all[20].path, "many/f119");
  EXPECT_EQ(all[21].path, "top.txt");
  EXPECT_EQ(all[21].size, 3);
  EXPECT_EQ(all[22].path, "with space & <angle> \"quote\" 'apos'.txt");
  EXPECT_EQ(all[23].path, "ünïcödé+plus=eq%pct.txt");
  for (const auto& o : all) {
    EXPECT_EQ(o.etag.size(), 34u) << o.path << ": a quoted MD5, " << o.etag;
    EXPECT_GT(o.modifiedUnixNanos, int64_t{1'600'000'000} * 1'000'000'000) << o.path;
  }
  // Every listed path reads back under its listed version.
  auto odd = origin("list/")->read(all[22].path, 0, 3, all[22].etag);
  ASSERT_TRUE(odd.isOk()) << odd.status();
  EXPECT_EQ(*odd, "odd");
  auto unicode = origin("list/")->read(all[23].path, 0, 7, all[23].etag);
  ASSERT_TRUE(unicode.isOk()) << unicode.status();
  EXPECT_EQ(*unicode, "unicode");
  // The whole bucket, and a prefix with nothing under it.
  EXPECT_GE(listAll(*origin("")).size(), 26u);
  EXPECT_TRUE(listAll(*origin("nothing-here/")).empty());
}

TEST_F(S3ProtocolTest, ListsMoreThanOneFullPage) {
  for (int i = 0; i < 1001; ++i) put("bulk/k" + std::to_string(10000 + i), "x");
  std::vector<size_t> sizes;
  const Status s = origin("bulk/")->list([&](std::vector<OriginObject>&& batch) {
    sizes.push_back(batch.size());
    return Status::ok();
  });
  ASSERT_TRUE(s.isOk()) << s;
  EXPECT_EQ(sizes, (std::vector<size_t>{1000, 1}));
}

// A part of the key order: after a path (a listing cut short goes on after the last path it
// stored), through another, under the prefix, over pages.
TEST_F(S3ProtocolTest, ListsARangeOfTheKeyOrder) {
  for (int i = 0; i < 12; ++i)
    put("resume/d" + std::to_string(i % 3) + "/f" + std::to_string(10 + i), "x");
  put("resume-sibling/outside.txt", "no");
  auto o = origin("resume/", /*pageSize=*/4);
  ASSERT_TRUE(o->listsInKeyOrder());
  const auto paths = [&](const KeyRange& range) {
    std::vector<std::string> listed;
    const Status s = o->listRange(range, [&](std::vector<OriginObject>&& batch) {
      for (auto& object : batch) listed.push_back(object.path);
      return Status::ok();
    });
    EXPECT_TRUE(s.isOk()) << s;
    return listed;
  };
  EXPECT_EQ(paths({.after = "d1/f14"}),
            (std::vector<std::string>{"d1/f17", "d1/f20", "d2/f12", "d2/f15", "d2/f18", "d2/f21"}))
      << "in key order, and only after d1/f14";
  EXPECT_EQ(paths({.after = "d0/f13", .through = "d1/f17"}),
            (std::vector<std::string>{"d0/f16", "d0/f19", "d1/f11", "d1/f14", "d1/f17"}));
}

// The key order cut at the top-level directories (a listing with delimiter '/'):
// the parts hold every file once between them, root files included.
TEST_F(S3ProtocolTest, SplitsTheKeyOrderAtTopLevelDirectories) {
  std::vector<std::string> all{"top.txt"};
  for (const std::string dir : {"a", "b", "c", "d", "e", "f"})
    for (int i = 0; i < 3; ++i) all.push_back(dir + "/f" + std::to_string(i));
  for (const auto& path : all) put("split/" + path, "x");
  std::sort(all.begin(), all.end());
  auto o = origin("split/", /*pageSize=*/4);
  const auto parts = o->split(3);
  ASSERT_TRUE(parts.isOk()) << parts.status();
  EXPECT_EQ(*parts, (std::vector<KeyRange>{{.after = "", .through = "c/"},
                                           {.after = "c/", .through = "e/"},
                                           {.after = "e/", .through = ""}}));
  std::vector<std::string> listed;
  for (const KeyRange& part : *parts) {
    ASSERT_TRUE(o->listRange(part, [&](std::vector<OriginObject>&& batch) {
                   for (auto& object : batch) listed.push_back(object.path);
                   return Status::ok();
                 }).isOk());
  }
  EXPECT_EQ(listed, all) << "every file once, in key order";
  EXPECT_EQ(o->split(1)->size(), 1u);
  EXPECT_EQ(*origin("split/a/")->split(4), std::vector<KeyRange>{KeyRange{}})
      << "no directories: one part";
}

TEST_F(S3ProtocolTest, ReadsRangesByteForByte) {
  std::string blob(300001, '\0');
  uint32_t state = 12345;
  for (auto& c : blob) {
    state = state * 1103515245u + 12345u;
    c = static_cast<char>(state >> 24);
  }
  put("read/blob.bin", blob);
  auto o = origin("read/");
  const auto all = listAll(*o);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].size, 300001);
  const std::string& etag = all[0].etag;
  for (const auto& [offset, length] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {0, 300001}, {12345, 65536}, {131072, 131072}, {299990, 11}}) {
    auto bytes = o->read("blob.bin", offset, length, etag);
    ASSERT_TRUE(bytes.isOk()) << bytes.status();
    EXPECT_TRUE(*bytes == blob.substr(static_cast<size_t>(offset), static_cast<size_t>(length)))
        << "range " << offset << "+" << length;
  }
  EXPECT_EQ(*o->read("blob.bin", 299990, 100, etag), blob.substr(299990));  // clipped at the end
  EXPECT_EQ(*o->read("blob.bin", 300001, 10, etag), "");                    // past the end
  EXPECT_EQ(*o->read("blob.bin", 0, 0, etag), "");
}

TEST_F(S3ProtocolTest, AChangedObjectIsAFailedPrecondition) {
  put("change/f.txt", "version one");
  auto o = origin("change/");
  const auto before = listAll(*o);
  ASSERT_EQ(before.size(), 1u);
  put("change/f.txt", "version two");
  EXPECT_EQ(o->read("f.txt", 0, 4, before[0].etag).status().code(),
            StatusCode::kFailedPrecondition);
  const auto after = listAll(*o);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0].etag, before[0].etag);
  EXPECT_EQ(*o->read("f.txt", 8, 3, after[0].etag), "two");
}

TEST_F(S3ProtocolTest, MissingObjectsAndBucketsAreNotFound) {
  put("gone/f.txt", "here for now");
  auto o = origin("gone/");
  const auto all = listAll(*o);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(s3().remove("gone/f.txt"), 204);
  EXPECT_EQ(o->read("f.txt", 0, 4, all[0].etag).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(o->read("never-was.txt", 0, 4, "").status().code(), StatusCode::kNotFound);

  auto absent = makeS3Origin({.bucket = "no-such-bucket", .endpoint = s3().endpoint()});
  ASSERT_TRUE(absent.isOk());
  const Status s = (*absent)->list([](auto&&) { return Status::ok(); });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no-such-bucket"), std::string::npos) << s;
}

TEST_F(S3ProtocolTest, VirtualHostAndAnonymousAddressing) {
  put("vhost/f.txt", "virtual host");
  auto vhost = makeS3Origin({.bucket = "data",
                             .prefix = "vhost/",
                             .endpoint = s3().virtualHostEndpoint(),
                             .pathStyle = false,
                             .accessKeyId = Secret("S3RVER"),
                             .secretAccessKey = Secret("S3RVER")});
  ASSERT_TRUE(vhost.isOk()) << vhost.status();
  const auto all = listAll(**vhost);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(*(*vhost)->read("f.txt", 8, 4, all[0].etag), "host");

  auto anonymous =
      makeS3Origin({.bucket = "data", .prefix = "vhost/", .endpoint = s3().endpoint()});
  ASSERT_TRUE(anonymous.isOk());
  EXPECT_EQ(listAll(**anonymous).size(), 1u);
}

TEST_F(S3ProtocolTest, UnknownCredentialsArePermissionDenied) {
  auto o = makeS3Origin({.bucket = "data",
                         .endpoint = s3().endpoint(),
                         .accessKeyId = Secret("AKIDUNKNOWN"),
                         .secretAccessKey = Secret("secret-never-shown")});
  ASSERT_TRUE(o.isOk());
  const Status s = (*o)->list([](auto&&) { return Status::ok(); });
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("\"data\""), std::string::npos) << s;
  EXPECT_EQ(s.message().find("AKIDUNKNOWN"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("secret-never-shown"), std::string::npos) << s;
}

// ---- URIs and options ----

TEST(S3UriTest, SplitsBucketAndPrefix) {
  auto full = parseS3Uri("s3://my-bucket.v2/datasets/coco/");
  ASSERT_TRUE(full.isOk()) << full.status();
  EXPECT_EQ(full->bucket, "my-bucket.v2");
  EXPECT_EQ(full->prefix, "datasets/coco/");
  EXPECT_EQ(parseS3Uri("s3://bucket")->prefix, "");
  EXPECT_EQ(parseS3Uri("s3://bucket/")->prefix, "");
  EXPECT_EQ(parseS3Uri("s3://bucket/with space%20/")->prefix, "with space%20/");
}

TEST(S3UriTest, RefusesBadUrisNamingThePart) {
  const auto message = [](std::string_view uri) {
    const Status s = parseS3Uri(uri).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << uri;
    return s.message();
  };
  EXPECT_NE(message("https://bucket/prefix/").find("expected s3://bucket/prefix/"),
            std::string::npos);
  EXPECT_NE(message("S3://bucket/").find("expected s3://"), std::string::npos);
  EXPECT_NE(message("s3:///prefix/").find("bucket name is missing"), std::string::npos);
  EXPECT_NE(message("s3://").find("bucket name is missing"), std::string::npos);
  for (const char* bad : {"s3://ab/", "s3://Upper/", "s3://under_score/", "s3://-dash/",
                          "s3://dots..twice/", "s3://trailing-/"}) {
    EXPECT_NE(message(bad).find("not a valid bucket name"), std::string::npos) << bad;
  }
  EXPECT_NE(message("s3://bucket/no-slash").find("must end in '/'"), std::string::npos);
  EXPECT_NE(message("s3://bucket//lead/").find("must not start with '/'"), std::string::npos);
  const std::string credentials = message("s3://AKID:hunter2@bucket/p/");
  EXPECT_NE(credentials.find("credentials do not belong in the URI"), std::string::npos);
  EXPECT_EQ(credentials.find("hunter2"), std::string::npos) << credentials;
}

TEST(S3OptionsTest, RefusesUnusableOptionsNamingTheField) {
  const auto message = [](S3OriginOptions options) {
    const Status s = makeS3Origin(std::move(options)).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    return s.message();
  };
  EXPECT_NE(message({.bucket = "x"}).find("bucket \"x\""), std::string::npos);
  EXPECT_NE(message({.bucket = "b-1", .prefix = "p"}).find("prefix"), std::string::npos);
  EXPECT_NE(message({.bucket = "b-1", .endpoint = "minio:9000"}).find("endpoint"),
            std::string::npos);
  EXPECT_NE(message({.bucket = "b-1", .endpoint = "http://minio:9000/path"}).find("without a path"),
            std::string::npos);
  EXPECT_NE(message({.bucket = "b-1", .region = "us:east"}).find("region"), std::string::npos);
  EXPECT_NE(message({.bucket = "b-1", .listPageSize = 1001}).find("listPageSize"),
            std::string::npos);
  const std::string halfKey =
      message({.bucket = "b-1", .accessKeyId = Secret("AKIDHALF"), .secretAccessKey = Secret()});
  EXPECT_NE(halfKey.find("secretAccessKey is empty"), std::string::npos) << halfKey;
  EXPECT_EQ(halfKey.find("AKIDHALF"), std::string::npos) << halfKey;
  EXPECT_NE(message({.bucket = "b-1", .sessionToken = Secret("t")}).find("sessionToken"),
            std::string::npos);
  EXPECT_TRUE(makeS3Origin({.bucket = "b-1"}).isOk());  // anonymous AWS
}

// ---- The XML of ListObjectsV2 ----

TEST(S3XmlTest, UnescapesEntitiesAndCharacterReferences) {
  EXPECT_EQ(xmlUnescape("a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos;"), "a & b <c> \"d\" 'e'");
  EXPECT_EQ(xmlUnescape("&amp;lt;"), "&lt;") << "unescaped once, not twice";
  EXPECT_EQ(xmlUnescape("&#38;&#x26;&#xD;&#233;&#x1F600;"), "&&\r\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(xmlUnescape("plain"), "plain");
  EXPECT_EQ(xmlUnescape(""), "");
  for (const char* bad : {"&", "a &amp b", "&nbsp;", "&#;", "&#x;", "&#xZZ;", "&#0;", "&#xD800;",
                          "&#x110000;", "&#-1;"}) {
    EXPECT_EQ(xmlUnescape(bad), std::nullopt) << bad;
  }
}

TEST(S3XmlTest, ParsesAListBucketResult) {
  const std::string xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&amp;</NextContinuationToken>
  <Contents>
    <Key>p/Tom &amp; Jerry &lt;1&gt;.txt</Key>
    <LastModified>2009-10-12T17:50:30.000Z</LastModified>
    <ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>
    <Size>434234</Size>
    <Owner><ID>75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a</ID></Owner>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents>
    <Key>p/dir/</Key><LastModified>2024-01-01T00:00:00Z</LastModified>
    <ETag>"d41d8cd98f00b204e9800998ecf8427e"</ETag><Size>0</Size>
  </Contents>
  <CommonPrefixes><Prefix>p/x/</Prefix></CommonPrefixes>
</ListBucketResult>)";
  auto page = parseListObjectsV2(xml);
  ASSERT_TRUE(page.isOk()) << page.status();
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->nextContinuationToken, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&");
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "p/Tom & Jerry <1>.txt");
  EXPECT_EQ(page->objects[0].size, 434234);
  EXPECT_EQ(page->objects[0].etag, "\"fba9dede5f27731c9771645a39863328\"");
  EXPECT_EQ(page->objects[0].modifiedUnixNanos, int64_t{1255369830} * 1'000'000'000);
  EXPECT_EQ(page->objects[1].key, "p/dir/");
  EXPECT_EQ(page->objects[1].etag, "\"d41d8cd98f00b204e9800998ecf8427e\"");
  EXPECT_EQ(page->objects[1].modifiedUnixNanos, int64_t{1704067200} * 1'000'000'000);
}

TEST(S3XmlTest, DecodesUrlEncodedKeysOnlyWhenTheResponseSaysSo) {
  const std::string contents =
      "<Contents><Key>p/a+b%2Bc%20d%C3%A9</Key><Size>1</Size></Contents></ListBucketResult>";
  auto encoded =
      parseListObjectsV2("<ListBucketResult><EncodingType>url</EncodingType>" + contents);
  ASSERT_TRUE(encoded.isOk()) << encoded.status();
  EXPECT_EQ(encoded->objects[0].key, "p/a b+c d\xC3\xA9");
  EXPECT_FALSE(encoded->truncated);
  auto plain = parseListObjectsV2("<ListBucketResult>" + contents);
  ASSERT_TRUE(plain.isOk()) << plain.status();
  EXPECT_EQ(plain->objects[0].key, "p/a+b%2Bc%20d%C3%A9");
}

TEST(S3XmlTest, ParsesTheDirectoriesOfADelimitedListing) {
  auto page = parseListObjectsV2(
      "<ListBucketResult><EncodingType>url</EncodingType><CommonPrefixes><Prefix>p/a%20b/"
      "</Prefix></CommonPrefixes><CommonPrefixes><Prefix>p/c/</Prefix></CommonPrefixes>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.isOk()) << page.status();
  EXPECT_EQ(page->commonPrefixes, (std::vector<std::string>{"p/a b/", "p/c/"}));
  EXPECT_TRUE(page->objects.empty());
}

TEST(S3XmlTest, RefusesWhatIsNotAListing) {
  for (const char* bad :
       {"<html>502 Bad Gateway</html>",
        "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>big</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a &bogus; b</Key><Size>1</Size></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>1</Size><LastModified>yesterday"
        "</LastModified></Contents></ListBucketResult>"}) {
    EXPECT_EQ(parseListObjectsV2(bad).status().code(), StatusCode::kUnavailable) << bad;
  }
  auto empty = parseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "</ListBucketResult>");
  ASSERT_TRUE(empty.isOk());
  EXPECT_TRUE(empty->objects.empty());
}

TEST(S3XmlTest, ParsesS3Timestamps) {
  EXPECT_EQ(parseIso8601UnixNanos("1970-01-01T00:00:00.000Z"), 0);
  EXPECT_EQ(parseIso8601UnixNanos("1970-01-01T00:00:01Z"), 1'000'000'000);
  EXPECT_EQ(parseIso8601UnixNanos("2009-10-12T17:50:30.5Z"), int64_t{1255369830'500'000'000});
  EXPECT_EQ(parseIso8601UnixNanos("2024-02-29T23:59:59.123456789Z"),
            int64_t{1709251199'123'456'789});
  for (const char* bad :
       {"", "2024-02-30T00:00:00Z", "2023-13-01T00:00:00Z", "2024-01-01T24:00:00Z",
        "2024-01-01 00:00:00Z", "2024-01-01T00:00:00", "2024-01-01T00:00:00.Z",
        "2024-01-01T00:00:00.1234567890Z", "2024-01-01T00:00:00+01:00"}) {
    EXPECT_EQ(parseIso8601UnixNanos(bad), std::nullopt) << bad;
  }
}

TEST(S3XmlTest, TimesOutsideWhatNanosecondsHoldAreRefused) {
  // Found by tests/fuzz/s3_listing_fuzz: a <LastModified> in year 1012 or 9999 overflowed the
  // nanoseconds since the epoch.
  EXPECT_EQ(parseIso8601UnixNanos("9999-12-31T23:59:59Z"), std::nullopt);
  EXPECT_EQ(parseIso8601UnixNanos("1012-10-12T17:50:30.000Z"), std::nullopt);
  EXPECT_EQ(parseIso8601UnixNanos("2262-01-01T00:00:00Z"), int64_t{9'214'646'400} * 1'000'000'000);
  EXPECT_EQ(parseIso8601UnixNanos("1678-01-01T00:00:00Z"), int64_t{-9'214'560'000} * 1'000'000'000);
  EXPECT_EQ(
      parseListObjectsV2("<ListBucketResult><Contents><Key>k</Key><Size>1</Size><LastModified>"
                         "1012-10-12T17:50:30.000Z</LastModified></Contents></ListBucketResult>")
          .status()
          .code(),
      StatusCode::kUnavailable);
}

}  // namespace
}  // namespace granary::cache
