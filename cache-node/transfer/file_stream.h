// A checkpoint file's bytes over a data-plane connection (frame.h's file put and file read), in
// pieces of 1 MiB, each hashed (XXH3-64) as it passes: a checkpoint file has no checksums
// recorded, so each side hashes what it sends or receives and the trailer compares the two.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

#include "common/result.h"
#include "common/xxh3.h"

namespace granary::cache::transfer {

inline constexpr int64_t kFilePiece = 1 << 20;

// Sends the `size` bytes of `fd` from offset 0 to `socket`, each piece passed by `pace` first
// (false: Cancelled) and hashed into `hash`; FailedPrecondition when the file is shorter.
Status sendFileBytes(int socket, int fd, int64_t size, std::chrono::milliseconds stall,
                     const std::function<bool(int64_t)>& pace, Xxh3Stream& hash);
// Receives `size` bytes from `socket` into `fd` from offset 0, hashing them into `hash` and
// telling `arrived` (may be empty) of each piece written. What is written goes on to the disk as
// the rest arrives (the caller's fsync waits for less).
Status receiveFileBytes(int socket, int fd, int64_t size, std::chrono::milliseconds stall,
                        Xxh3Stream& hash, const std::function<void(int64_t)>& arrived = {});

}  // namespace granary::cache::transfer
