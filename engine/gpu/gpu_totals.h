#pragma once

namespace granary::cache {

// A GPU's figures integrated over the samples since the node first saw it (by UUID), so that a
// reader taking two of them, minutes apart, gets the mean over exactly that window:
// Δbusy ÷ Δsampled is the mean utilization, Δmemory ÷ Δsampled the mean memory used.
struct GpuTotals {
  double sampledSeconds = 0;     // time covered by samples that read utilization
  double busySeconds = 0;        // utilization × interval, summed
  double memoryByteSeconds = 0;  // memory used × interval, summed
};

}  // namespace granary::cache
