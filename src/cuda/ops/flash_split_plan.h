#pragma once
// How many ways the flash attention forward splits each query tile's keys: plain host arithmetic,
// which tests/ops/test_flash_split_plan.cpp checks on any machine.
//
// Why split: a grid of fewer blocks than the GPU holds at once leaves SMs idle while each block walks
// its whole key range one tile after another. A 1024-token prompt of a 9-head model is 72 blocks of
// 128 queries on 132 SMs, and the last of them walks 16 key tiles in turn. Split n ways, each query
// tile's key range is cut into n contiguous chunks, one block each, and a second kernel merges a
// row's n partial results by their log-sum-exps.
#include <algorithm>

#include "ignis/ops/flash_attention.h"

namespace ignis::cuda {

// The most splits a caller may ask for (num_splits), and the most the automatic choice takes.
inline constexpr long long kMaxFlashSplits = kFlashAttentionMaxSplits;
inline constexpr long long kMaxAutoFlashSplits = 16;

// Splits for a grid of `blocks` blocks (query tiles x heads x batch) whose tiles see at most `key_tiles`
// key tiles, on a GPU that holds `resident` of these blocks at once. Measured (H200 and H100, sessions 32 and
// 33 of docs/PERF_NOTES.md): splitting pays where SMs would idle, and a merge costs more than a walk of fewer
// than 16 key tiles saves, or than the SMs a grid of most of a wave leaves idle (a causal B2 S1024 H16 D64
// grid, 256 blocks of 264, lost 17-19% at 2 and 3 splits; one of 256 blocks of 396 gained 25% at 3). So:
// none past three quarters of a wave; otherwise as many splits as one wave holds, floor(resident / blocks),
// two more under a causal mask (half its tiles walk less than half the keys and end early, leaving the GPU
// to the long tiles' chunks), at least four key tiles a chunk, at most kMaxAutoFlashSplits.
inline int flash_auto_splits(long long blocks, long long key_tiles, long long resident, bool causal) {
  if (blocks <= 0 || 4 * blocks > 3 * resident || key_tiles < 16) return 1;
  const long long wave = resident / blocks + (causal ? 2 : 0);
  const long long splits = std::min({wave, key_tiles / 4, kMaxAutoFlashSplits});
  return splits < 2 ? 1 : static_cast<int>(splits);
}

}  // namespace ignis::cuda
