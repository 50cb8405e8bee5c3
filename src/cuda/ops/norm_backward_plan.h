#pragma once
// The block shape of the norm backward's staged kernel (norm_backward.cu, backward_staged) by row
// length and card: plain host arithmetic, so the tests check it on any machine, for either kind of
// card.

namespace ignis::cuda::norm {

// Backward (see backward_staged): a row slice of x and dy takes at most kStageBytes of shared
// memory per stage, kStages stages a block (192 KB at most: one row computed while the next two
// are in flight; six stages for 16 KB slices were 7-13% slower at 4096 columns, H100 PERF_NOTES
// session 5); a thread holds at most kMaxStagedPacks packs of a row (its dweight/dbias
// accumulators are 4-32 registers a sum), in blocks of at most kStagedThreads threads. Slices are
// spread over <= 256 threads while 4 packs a thread allow it (512 on fast-memory cards, see
// kFastMemoryGbpsPerSm), so short rows get several blocks an SM. Rows longer than one block's
// slice take a cluster of up to kMaxStagedCluster blocks.
inline constexpr int kStages = 3;
inline constexpr long long kStageBytes = 64 * 1024;
inline constexpr int kMaxStagedPacks = 4;
inline constexpr int kStagedThreads = 512;
inline constexpr int kPreferredStagedThreads = 256;
inline constexpr int kMaxStagedCluster = 8;  // the portable cluster size
// On cards whose DRAM can feed an SM faster than this (GB/s an SM, memory_gbps_per_sm), slices of
// at least 2 x kStagedThreads packs take kStagedThreads threads of 2+ packs instead of 256 of 4:
// there a block's per-row chain (loads landed, reduction, barrier), not DRAM, sets the pace, and
// twice the warps halve it. On the H200 (~37 GB/s an SM) that took bf16 8192 columns from 64 to 75%
// of copy (LayerNorm) and 69 to 76-77% (RMSNorm), RMSNorm f32 4096 from 75 to 82%, LayerNorm f32
// 4096 unchanged; the H100 (~25) keeps 256 threads and its two rows a step, which gained there
// (PERF_NOTES sessions 11 and 13). bf16 4096 (512 packs) stays at 256: 512 threads of one pack lost
// 1-4 points on the H200 too.
inline constexpr double kFastMemoryGbpsPerSm = 30.0;

// How backward_staged holds a row: `cluster` blocks of `threads` threads with `packs` packs each
// (a thread's share of its block's slice of ceil(row packs / cluster)), `smem` bytes of `stages`
// stages. cluster == 0: the row does not fit.
struct StagedPlan {
  int cluster = 0;
  int threads = 0;
  int packs = 0;
  int smem = 0;
};

// fast_memory: the device feeds an SM faster than kFastMemoryGbpsPerSm.
inline StagedPlan plan_staged(long long dim, int v, bool fast_memory) {
  const long long packs = dim / v;
  for (int c = 1; c <= kMaxStagedCluster; c *= 2) {
    const long long slice = (packs + c - 1) / c;
    if (slice * 32 > kStageBytes) continue;  // 16 bytes each of x and dy a pack
    const long long preferred =
        fast_memory && slice >= 2LL * kStagedThreads ? kStagedThreads : kPreferredStagedThreads;
    int p = 1;
    while (p < kMaxStagedPacks && slice > static_cast<long long>(p) * preferred) p *= 2;
    const long long threads = ((slice + p - 1) / p + 31) / 32 * 32;
    if (threads > kStagedThreads) continue;
    return {c, static_cast<int>(threads), p, static_cast<int>(kStages * slice * 32)};
  }
  return {};
}

}  // namespace ignis::cuda::norm
