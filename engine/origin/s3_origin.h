// s3:// origins: objects under a key prefix of an S3 bucket (AWS, or any S3-compatible store:
// MinIO, Ceph RGW, ...). The listing comes from ListObjectsV2, paginated; data comes by ranged
// GetObject, pinned to the listed version with If-Match and a check of the returned ETag.
// Requests are signed by libcurl (AWS Signature V4) when credentials are given, anonymous
// otherwise. Connections are reused; 5xx, 429, timeouts, resets and truncated bodies are
// retried with jittered backoff.
//
// Errors of the origin (see origin.h): NotFound (no such key, or no such bucket),
// FailedPrecondition (the object changed since it was listed), PermissionDenied (403, naming
// the bucket), Unauthenticated (401 from an S3-compatible store), InvalidArgument (a bad option,
// a bucket in another region, a request S3 refuses as malformed), Unavailable (transient, or a
// listing that is not a ListBucketResult). Messages never contain credentials.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/secret.h"
#include "engine/origin/origin.h"

namespace granary::cache {

struct S3OriginOptions {
  // Bucket name (3-63 characters: lower-case letters, digits, '.' and '-'). Required.
  std::string bucket;
  // Key prefix of the dataset: "" (the whole bucket) or ending in '/', e.g. "datasets/coco/".
  // Listed paths are relative to it.
  std::string prefix;
  // Service endpoint, scheme://host[:port] with no path, e.g. "http://minio.storage:9000".
  // Default "": AWS, https://s3.<region>.amazonaws.com.
  std::string endpoint;
  // Region the requests are signed for. Default us-east-1. S3-compatible stores mostly accept
  // any value; AWS refuses a region other than the bucket's (InvalidArgument).
  std::string region = "us-east-1";
  // Addressing: true puts the bucket in the path (endpoint/bucket/key), false in the host name
  // (bucket.endpoint/key). Default (unset): virtual-host for AWS, path-style when an endpoint is
  // given (most S3-compatible stores do not have a DNS name per bucket). Bucket names with dots
  // over https need path-style: the wildcard certificate does not cover them.
  std::optional<bool> pathStyle;
  // Credentials. Both empty: anonymous requests (public buckets). sessionToken (temporary
  // credentials from STS) needs the other two and is sent as x-amz-security-token.
  Secret accessKeyId;
  Secret secretAccessKey;
  Secret sessionToken;
  // Per request. Default 30 s.
  std::chrono::seconds timeout{30};
  // Attempts per request for transient failures. Default 4.
  int maxAttempts = 4;
  // First retry delay; doubles with jitter up to 5 s. Default 100 ms.
  std::chrono::milliseconds retryDelay{100};
  // Keys per ListObjectsV2 page (max-keys), 1-1000. Default 1000, S3's maximum: fewer round trips.
  int listPageSize = 1000;
};

// InvalidArgument naming the field (bucket, prefix, endpoint, region, credentials,
// listPageSize) when an option is not usable.
Result<std::unique_ptr<Origin>> makeS3Origin(S3OriginOptions options);

// Writes objects below an S3 origin's prefix (a job's checkpoints). Paths are relative to the
// prefix. Errors as the origin's; retried like its requests. Thread-safe.
class S3ObjectWriter {
 public:
  virtual ~S3ObjectWriter() = default;
  // PutObject of a whole body.
  virtual Status put(const std::string& path, const std::string& body) = 0;
  // CreateMultipartUpload: the upload's id.
  virtual Result<std::string> startMultipart(const std::string& path) = 0;
  // UploadPart number `part` (1-10000, each but the last at least 5 MiB): the part's ETag.
  virtual Result<std::string> putPart(const std::string& path, const std::string& uploadId,
                                      int part, const std::string& body) = 0;
  // CompleteMultipartUpload of the parts' ETags in order: the object appears whole.
  virtual Status completeMultipart(const std::string& path, const std::string& uploadId,
                                   const std::vector<std::string>& etags) = 0;
  // AbortMultipartUpload: the parts are dropped.
  virtual Status abortMultipart(const std::string& path, const std::string& uploadId) = 0;
  // DeleteObject; OK when there is no such object.
  virtual Status remove(const std::string& path) = 0;
};

// The same options as makeS3Origin, the same errors.
Result<std::unique_ptr<S3ObjectWriter>> makeS3ObjectWriter(S3OriginOptions options);

struct S3Location {
  std::string bucket;
  std::string prefix;  // "" or ending in '/'
};

// Splits "s3://bucket/prefix/" into bucket "bucket" and prefix "prefix/" ("s3://bucket" and
// "s3://bucket/" give prefix ""). Keys are taken literally (no percent-decoding), as the AWS
// CLI does. InvalidArgument naming the part at fault: the scheme, the bucket, or a prefix that
// does not end in '/'.
Result<S3Location> parseS3Uri(std::string_view uri);

// ---- Pure pieces of the protocol, exposed for tests. ----

// One page of a ListObjectsV2 response.
struct S3ListPage {
  struct Object {
    std::string key;  // unescaped (and URL-decoded when the response says EncodingType url)
    int64_t size = 0;
    std::string etag;  // as S3 sends it, quotes included: the same text as GetObject's ETag
    int64_t modifiedUnixNanos = 0;
  };
  std::vector<Object> objects;
  // With a delimiter: the keys' prefixes up to it (<CommonPrefixes><Prefix>), decoded alike.
  std::vector<std::string> commonPrefixes;
  bool truncated = false;
  std::string nextContinuationToken;
};

// Parses a ListBucketResult document. Unavailable when it is not one (an HTML error page from
// a proxy, a field that does not parse).
Result<S3ListPage> parseListObjectsV2(std::string_view xml);

// Replaces XML's predefined entities (&amp; &lt; &gt; &quot; &apos;) and character references
// (&#38; &#x26;) in element text. nullopt for a malformed or unknown reference.
std::optional<std::string> xmlUnescape(std::string_view text);

// An ISO 8601 UTC instant as S3 writes it ("2009-10-12T17:50:30.000Z", fraction optional) in
// nanoseconds since the Unix epoch; nullopt when it is not one, or is outside the years
// 1677-2262 that int64_t nanoseconds can hold.
std::optional<int64_t> parseIso8601UnixNanos(std::string_view text);

}  // namespace granary::cache
