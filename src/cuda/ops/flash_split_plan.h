#pragma once
// The flash attention forward's schedule: how many ways it splits each query tile's keys and, on Hopper, which
// unit shape it runs. Plain host arithmetic, which tests/ops/test_flash_split_plan.cpp checks on any machine.
//
// Why split: a grid of fewer blocks than the GPU holds at once leaves SMs idle while each block walks
// its whole key range one tile after another. A 1024-token prompt of a 9-head model is 72 blocks of
// 128 queries on 132 SMs, and the last of them walks 16 key tiles in turn. Split n ways, each query
// tile's key range is cut into n contiguous chunks, one block each, and a second kernel merges a
// row's n partial results by their log-sum-exps.
#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <vector>

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

// The Hopper kernel (flash_forward_sm90.cuh) plans by a model instead: its units have fixed costs the rule above
// leaves out, it comes in two unit shapes at head_dim 64, and its blocks take units in grid order. A unit costs
// its walk of key tiles plus about 1.5 tiles (its Q copy, the pipeline's fill and drain, its epilogue), an empty
// unit about 0.5, and a split call 3.3 more (partial results in fp32 and the combine kernel). Units run in grid
// order (a sequence's heads, each head's query tiles from the longest walk down, each tile's splits), each on
// the first block slot to free; past four units a slot the kernel is persistent and the time is the total
// work over the slots plus one longest unit. Fitted on the H200 (docs/PERF_NOTES.md "# Session 36": 28 shapes,
// 1-4 splits, both unit shapes at head_dim 64): its choice ran at 0.91-1.0x the best measured, where the rule
// above ran as slow as 0.66x (B1 S1024 H16 D64, split in two where one was best).
inline constexpr double kUnitCostInTiles = 1.5;
inline constexpr double kEmptyUnitCostInTiles = 0.5;
inline constexpr double kMergeCostInTiles = 3.3;

// One unit shape a kernel can run: query rows a unit, a key tile's time relative to the other candidates', and
// how many units the device runs at once.
struct UnitShape {
  int rows;
  double tile_cost;
  long long resident;
};

struct SchedulePlan {
  int shape;   // index into the candidates
  int splits;  // key splits of each query tile
};

struct ScheduleProblem {
  long long heads;     // batch * heads_q: copies of the query tiles' work
  long long seqlen_q;  // queries a head
  long long seqlen_k;  // keys a head (for a KV cache, its longest sequence when known)
  bool causal;
  int key_tile;        // keys a tile
};

// The modeled time of p run in `shape` units split `splits` ways, in the first candidate's key tiles; or `beat`
// when it cannot be less (a bound that spares working out the order).
inline double modeled_schedule_time(const ScheduleProblem& p, const UnitShape& shape, long long splits,
                                    double beat = std::numeric_limits<double>::infinity()) {
  const long long tiles = (p.seqlen_q + shape.rows - 1) / shape.rows;
  auto walk = [&](long long tile) {  // key tiles the rows of query tile `tile` see
    const long long last_row = std::min((tile + 1) * shape.rows, p.seqlen_q) - 1;
    const long long last_key =
        p.causal ? std::min(p.seqlen_k - 1, last_row + p.seqlen_k - p.seqlen_q) : p.seqlen_k - 1;
    return last_key >= 0 ? last_key / p.key_tile + 1 : 0;
  };
  auto unit_cost = [](long long keys) { return keys > 0 ? static_cast<double>(keys) + kUnitCostInTiles
                                                        : kEmptyUnitCostInTiles; };
  // One head's work and its longest unit: split s of a tile walking w tiles takes chunk = ceil(w / splits)
  // of them from s * chunk (as plan_work cuts them), so some splits may be empty.
  double one_head = 0.0, longest = 0.0;
  for (long long tile = 0; tile < tiles; ++tile) {
    const long long w = walk(tile), chunk = (w + splits - 1) / splits;
    const long long whole = chunk > 0 ? w / chunk : 0, rest = w - whole * chunk;
    const long long empty = splits - whole - (rest > 0 ? 1 : 0);
    one_head += static_cast<double>(whole) * unit_cost(chunk) + (rest > 0 ? unit_cost(rest) : 0.0) +
                static_cast<double>(empty) * kEmptyUnitCostInTiles;
    longest = std::max(longest, unit_cost(chunk));
  }
  const double spread = static_cast<double>(p.heads) * one_head / static_cast<double>(shape.resident);
  const double merge = splits > 1 ? kMergeCostInTiles : 0.0;
  const long long count = p.heads * tiles * splits;
  double time = 0.0;
  if (count >= 4 * shape.resident) {
    time = spread + longest;
  } else if (count <= shape.resident) {
    time = longest;  // every unit starts at once
  } else if (shape.tile_cost * std::max(longest, spread) + merge >= beat) {
    return beat;  // no faster than `beat` whatever the order: the order is not worked out
  } else {  // up to 4 * resident units, in grid order (query tiles from the longest walk down), each to the
            // first slot that frees
    std::vector<double> units;
    for (long long tile = tiles - 1; tile >= 0; --tile) {
      const long long w = walk(tile), chunk = (w + splits - 1) / splits;
      for (long long split = 0; split < splits; ++split)
        units.push_back(unit_cost(std::clamp(w - split * chunk, 0LL, chunk)));
    }
    std::priority_queue<double, std::vector<double>, std::greater<>> slots;
    for (long long i = 0; i < shape.resident; ++i) slots.push(0.0);
    for (long long h = 0; h < p.heads; ++h)
      for (double u : units) {
        const double end = slots.top() + u;
        slots.pop();
        slots.push(end);
        time = std::max(time, end);
      }
  }
  return shape.tile_cost * time + merge;
}

// The candidate shape and split count of least modeled time (the first candidate and the fewest splits among
// equals), with the split count fixed when `splits` is nonzero. Automatic counts stop at kMaxAutoFlashSplits,
// at one key tile a chunk and where the kernel turns persistent (more splits then only add work).
inline SchedulePlan plan_schedule(const ScheduleProblem& p, const UnitShape* shapes, int shape_count, int splits) {
  SchedulePlan best{0, splits > 0 ? splits : 1};
  if (p.heads <= 0 || p.seqlen_q <= 0 || p.seqlen_k <= 0 || p.key_tile <= 0 || shape_count <= 0) return best;
  for (int s = 0; s < shape_count; ++s)
    if (shapes[s].rows <= 0 || shapes[s].resident <= 0) return best;
  const long long key_tiles = (p.seqlen_k + p.key_tile - 1) / p.key_tile;
  const long long first = splits > 0 ? splits : 1;
  const long long last = splits > 0 ? splits : std::min(key_tiles, kMaxAutoFlashSplits);
  double best_time = std::numeric_limits<double>::infinity();
  for (int s = 0; s < shape_count; ++s) {
    const long long tiles = (p.seqlen_q + shapes[s].rows - 1) / shapes[s].rows;
    for (long long n = first; n <= last; ++n) {
      if (n > first && p.heads * tiles * n >= 4 * shapes[s].resident) break;
      const double time = modeled_schedule_time(p, shapes[s], n, best_time);
      if (time < best_time) best = {s, static_cast<int>(n)}, best_time = time;
    }
  }
  return best;
}

}  // namespace ignis::cuda
