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
// grid, 256 blocks of 264, lost 17-19% at 2 and 3 splits). So none past three quarters of a wave. Below that,
// n splits take ceil(n * blocks / resident) waves of 1/n of the walk each: the count with the fewest such
// walks (the fewest splits among equals) is what full masks measured best, 2 and 4 splits of 88 blocks on 132
// SMs losing to 3 (two whole waves). A causal mask takes one more: half its tiles walk less than half the keys
// and end early. At least four key tiles a chunk, at most kMaxAutoFlashSplits.
inline int flash_auto_splits(long long blocks, long long key_tiles, long long resident, bool causal) {
  if (blocks <= 0 || 4 * blocks > 3 * resident || key_tiles < 16) return 1;
  const long long most = std::min(key_tiles / 4, kMaxAutoFlashSplits);
  long long best = 1;
  for (long long n = 2; n <= most; ++n) {
    // Walk time of n splits against best's, in the same units: waves(n) / n < waves(best) / best.
    const long long waves = (n * blocks + resident - 1) / resident;
    const long long best_waves = (best * blocks + resident - 1) / resident;
    if (waves * best < best_waves * n) best = n;
  }
  return static_cast<int>(std::min(best + (causal ? 1 : 0), most));
}

// The rule above, fitted on the mma.sync kernel's 64-key tiles, split the Hopper kernel's units too finely: its
// units (flash_forward_sm90.cuh, 128-key tiles) have fixed costs the rule leaves out. Each unit copies its Q and
// fills and drains the pipeline, about 1.5 key tiles' time; a split writes partial results in fp32 and launches the
// combine kernel, about 3.3. Fitted on the H200 (docs/PERF_NOTES.md "# Session 36": 22 shapes, 1-8 splits), where
// the old rule's choice ran as slow as 0.66x the best count's (B1 S1024 H16 D64); this one's is the best count or
// within 7% of it (B1 S512 H9 D64, where 4 splits beat its 1 by 7%).
// Neither mask takes an extra split here: causal grids measured best at the same counts as full ones.
inline constexpr double kSplitUnitCostInTiles = 1.5;
inline constexpr double kSplitMergeCostInTiles = 3.3;

// Splits for `blocks` units (query tiles x heads x batch) that walk at most `key_tiles` of the Hopper kernel's key
// tiles, `resident` of them at once: the count of least modeled time
//   ceil(n * blocks / resident) * (key_tiles / n + unit cost) + (n > 1 ? merge cost : 0),
// the fewest among equals, at most kMaxAutoFlashSplits and one key tile a chunk.
inline int flash_auto_splits_by_cost(long long blocks, long long key_tiles, long long resident) {
  if (blocks <= 0 || key_tiles <= 1 || resident <= 0) return 1;
  const long long most = std::min(key_tiles, kMaxAutoFlashSplits);
  auto modeled = [&](long long n) {
    const auto waves = static_cast<double>((n * blocks + resident - 1) / resident);
    const double walk = static_cast<double>(key_tiles) / static_cast<double>(n);
    return waves * (walk + kSplitUnitCostInTiles) + (n > 1 ? kSplitMergeCostInTiles : 0.0);
  };
  long long best = 1;
  for (long long n = 2; n <= most; ++n)
    if (modeled(n) < modeled(best)) best = n;
  return static_cast<int>(best);
}

}  // namespace ignis::cuda
