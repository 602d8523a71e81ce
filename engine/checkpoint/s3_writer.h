// Checkpoint uploads to s3://: a file up to kMultipartAbove in one PutObject, a larger one in a
// multipart upload of parts read one at a time (at most 10,000 parts, each at least
// kMultipartAbove), completed only once every part is in, aborted when it stops or fails.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/checkpoint/origin_writer.h"
#include "engine/origin/s3_origin.h"

namespace granary::checkpoint {

inline constexpr int64_t kMultipartAbove = 16 << 20;

Result<std::unique_ptr<OriginWriter>> makeS3Writer(const cache::SourceSpec& source);

// The writer over a store's object writer (tests give their own).
std::unique_ptr<OriginWriter> makeS3Writer(std::unique_ptr<cache::S3ObjectWriter> store);

}  // namespace granary::checkpoint
