#pragma once
// The blocks an H100/H200 SM holds for a given shared memory a block, counted the way the hardware
// hands it out: the host tests of sm_share.h and row_residency.h check their sizes against it.
#include <algorithm>

#include "cuda/common/sm_share.h"

namespace ignis::cuda::test {

constexpr long long kSmBytes = 228 * 1024;  // an H100/H200 SM's shared memory
constexpr long long kReserved = 1024;       // what sm_90 reserves for each block
constexpr long long kMaxBlocks = 32;        // the blocks an sm_90 SM holds at most

// The blocks an SM holds when each asks for `dynamic` bytes and has `static_bytes` of its own,
// each block's shared memory rounded up to a granule (`apart`: each part rounded on its own).
inline long long blocks_an_sm(long long dynamic, long long static_bytes, bool apart = false) {
  const long long rounded =
      apart ? round_to_granule(dynamic) + round_to_granule(static_bytes) : round_to_granule(dynamic + static_bytes);
  return std::min(kMaxBlocks, kSmBytes / (rounded + kReserved));
}

}  // namespace ignis::cuda::test
