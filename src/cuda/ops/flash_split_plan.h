#pragma once
// How many ways the flash attention forward splits each query tile's keys: plain host arithmetic,
// which tests/ops/test_flash_split_plan.cpp checks on any machine.
//
// Why split: a grid of fewer blocks than the GPU holds at once leaves SMs idle while each block walks
// its whole key range one tile after another. A 1024-token prompt of a 9-head model is 144 blocks of
// 64 queries on 132 SMs, and the last of them walks 16 key tiles in turn. Split n ways, each query
// tile's key range is cut into n contiguous chunks, one block each, and a second kernel merges a
// row's n partial results by their log-sum-exps.
#include <algorithm>

namespace ignis::cuda {

// The most splits a caller may ask for (num_splits), and the most the automatic choice takes.
inline constexpr long long kMaxFlashSplits = 64;
inline constexpr long long kMaxAutoFlashSplits = 16;

// Splits for a grid of `blocks` blocks (query tiles x heads x batch) whose tiles see at most `key_tiles`
// key tiles, on a GPU that holds `resident` of these blocks at once. From shapes only, so that a
// captured launch stays right as a KV cache's device lengths change. A grid that fills the GPU is not
// split; a smaller one is split until it would, keeping at least two key tiles a chunk.
inline int flash_auto_splits(long long blocks, long long key_tiles, long long resident) {
  if (blocks <= 0 || blocks >= resident) return 1;
  const long long fill = (resident + blocks - 1) / blocks;
  return static_cast<int>(std::clamp(std::min(fill, key_tiles / 2), 1LL, kMaxAutoFlashSplits));
}

}  // namespace ignis::cuda
