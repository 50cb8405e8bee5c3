#pragma once
// The block shape and schedule of the norm backward's staged kernel (norm_backward.cu,
// backward_staged) by norm, dtype, row length and card: plain host arithmetic, so the tests check it
// on any machine, for either kind of card.
#include <initializer_list>

namespace ignis::cuda::norm {

// Backward (see backward_staged): a row slice of x and dy takes at most kStageBytes of shared
// memory per stage, kStages stages a block (192 KB at most: one row computed while the next two
// are in flight; six stages for 16 KB slices were 7-13% slower at 4096 columns, H100 PERF_NOTES
// session 5); a thread holds at most kMaxStagedPacks packs of a row (its dweight/dbias
// accumulators are 4-32 registers a sum), in blocks of at most kStagedThreads threads. Slices are
// spread over <= 256 threads while 4 packs a thread allow it (512 on fast-memory cards, see below),
// so short rows get several blocks an SM. Rows longer than one block's slice take a cluster of up
// to kMaxStagedCluster blocks.
inline constexpr int kStages = 3;
inline constexpr long long kStageBytes = 64 * 1024;
inline constexpr int kMaxStagedPacks = 4;
inline constexpr int kStagedThreads = 512;
inline constexpr int kPreferredStagedThreads = 256;
inline constexpr int kMaxStagedCluster = 8;  // the portable cluster size
// On fast-memory cards (fast_memory_card, launch.cuh), slices of at least 2 x kStagedThreads packs
// take kStagedThreads threads of 2+ packs instead of 256 of 4: there a block's per-row chain (loads
// landed, reduction, barrier), not DRAM, sets the pace, and twice the warps halve it. On the H200
// (~37 GB/s an SM) that took bf16 8192 columns from 64 to 75% of copy (LayerNorm) and 69 to 76-77%
// (RMSNorm), RMSNorm f32 4096 from 75 to 82%, LayerNorm f32 4096 unchanged; the H100 (~25) keeps
// 256 threads and its two rows a step, which gained there (PERF_NOTES sessions 11 and 13). bf16
// 4096 (512 packs) stays at 256: 512 threads of one pack lost 1-4 points on the H200 too.

// How backward_staged holds a row: `cluster` blocks of `threads` threads with `packs` packs each
// (a thread's share of its block's slice of ceil(row packs / cluster)), `smem` bytes of `stages`
// stages. cluster == 0: the row does not fit.
struct StagedPlan {
  int cluster = 0;
  int threads = 0;
  int packs = 0;
  int smem = 0;
};

// fast_memory: fast_memory_card() (launch.cuh) of the device.
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

// Rows this long or shorter sum their partial rows in the same (cooperative) launch. Longer rows
// keep two launches and the cluster merge of partial rows: without the merge their partial rows
// (264 x 8192 floats a sum) cost more than the second launch (bf16 8192 / 16384 lost 2-3 points
// of copy, H100 PERF_NOTES session 5).
inline constexpr long long kFinishColumns = 4096;

// The cooperative finish sums the [groups, dim] partial rows in chunks of this many columns, a block
// taking its chunks one after the other, so a second chunk costs more than wider loads: the narrowest
// of 16, 32 and 64 columns whose chunks (sums of them a column: 2 for LayerNorm) come to at most one a
// block, and 32 where none does. RMSNorm bf16 4096 at 132 blocks measured 79 / 79 / 79 -> 80 / 80 /
// 79% of copy with 128 chunks of 32 instead of 256 of 16, and LayerNorm bf16 4096 76 -> 77% (two
// A/B calls, three rounds each, both orders) with 128 chunks of 64 instead of 256 of 32 (H100,
// PERF_NOTES sessions 14 and 15).
constexpr int finish_chunk_columns(int sums, long long dim, long long blocks) {
  for (int columns : {16, 32, 64})
    if (sums * ((dim + columns - 1) / columns) <= blocks) return columns;
  return 32;
}

// Whether the stages are filled by bulk copies (sm_90) or per-thread cp.async (see RowStages).
// LayerNorm's 16-bit rows of 2049-4096 columns (2 packs a thread) take cp.async: 76% of copy against
// 69% with bulk copies at 4096 bf16 (one group an SM; H100, PERF_NOTES session 9). So do the 16-bit
// 2-pack blocks of either norm that take two rows a step: with bulk fills (which go out after a
// step's first barrier) four stages leave no row in flight beyond the step, and bf16 4096 fell
// 63 -> 48% (LayerNorm) and 70 -> 52% (RMSNorm) on the H200 (PERF_NOTES session 14). Every other
// measured shape (4096-16384 columns, both norms, f32 and bf16) was as fast or faster with bulk
// copies. element_bytes: 2 (bf16, f16) or 4 (f32).
constexpr bool bulk_stage_fills(bool layer, int element_bytes, int packs, int rows_a_step) {
  return !(element_bytes == 2 && packs == 2 && (layer || rows_a_step == 2));
}

// Where the stages' ring starts: ring_line_offset bytes past a 128-byte line of shared memory,
// placed by the kernel (kRingRoom bytes beyond the stages leave room for the shift). Before, the ring
// started wherever the static shared memory ended, and 16 bytes more of it cost every backward cell
// 6-14 points (H100, PERF_NOTES session 17). On a line: LayerNorm's 4-pack blocks of a row a step,
// which the static memory had left 64 bytes past one, lost there (H100 f32 4096 87.5 -> 83.2% of
// copy, H200 bf16 16384 79.0 -> 72.8%), and keep the 64. With that, against the old placement in
// the same call: H100 16-bit 8192 columns (4-pack two-row blocks) LayerNorm 78.3 -> 80.4% and
// RMSNorm 83.8 -> 84.9%; H200 LayerNorm bf16 8192 (2 packs) 75.0 -> 76.8%, RMSNorm f32 16384 89.6 ->
// 92.9%; every other cell within a point (PERF_NOTES session 18). layer: LayerNorm; packs: P;
// rows_a_step: R.
inline constexpr int kRingLine = 128;
inline constexpr int kRingRoom = 2 * kRingLine;
constexpr int ring_line_offset(bool layer, int packs, int rows_a_step) {
  return layer && packs == 4 && rows_a_step == 1 ? 64 : 0;
}

// How a plan's rows are taken: rows_a_step (1 or 2, in one reduction and block barrier), the groups
// of rows an SM (1 or 2: the grid), and the stages' shared memory (one stage more for two rows, and
// kRingRoom).
struct StagedSchedule {
  int rows_a_step = 1;
  int groups_per_sm = 2;
  int smem = 0;
};

// layer: LayerNorm, else RMSNorm; smem_room: the shared memory a block may opt into.
inline StagedSchedule schedule_staged(const StagedPlan& plan, bool layer, int element_bytes, long long dim,
                                      bool fast_memory, long long smem_room) {
  // About two groups an SM: enough loads in flight, few partial rows. LayerNorm's whole-row blocks
  // of 256+ threads and 2+ packs a thread (rows of 8 KB or more) at up to kFinishColumns take one an
  // SM: half the partial rows, and 4096 columns measured 76 / 87% of copy against 69 / 81% (bf16 /
  // f32; H100, PERF_NOTES session 9). f32 rows of 2048 columns have bf16 4096's block shape and follow
  // it unmeasured; shorter rows keep two groups an SM (fewer bytes in flight a group). RMSNorm's
  // 16-bit rows join them, with two rows a step and cp.async fills, except on fast-memory cards: bf16
  // 4096 measured 77 -> 78% of copy on the H100 in each of three A/B calls (76 / 77 / 77 -> 78 / 78 /
  // 78-79, three rounds each) and 71 -> 70% on the H200; a row a step with bulk fills lost (77 -> 74;
  // PERF_NOTES session 14).
  const bool rms_as_layer = !layer && element_bytes == 2 && !fast_memory;
  // RMSNorm's f32 rows of 512-thread blocks on fast-memory cards (4096 columns) take one group an SM
  // too: 80.2 / 79.9 / 80.5 -> 86.1 / 85.9 / 86.2% of copy on the H200. Its 16-bit rows lose there
  // with one (bf16 4096 71 -> 65%, 8192 76 -> 68%; PERF_NOTES session 19).
  const bool rms_f32_fast = !layer && element_bytes == 4 && fast_memory && plan.threads == kStagedThreads;
  // RMSNorm's 16-bit rows of 512-thread blocks of 2 packs on fast-memory cards (8192 columns; their partial rows are
  // summed by a second launch) take one group an SM as well: 75.4-76.3 -> 81.5-82.1% of copy on the H200, measured
  // with one block an SM forced by padded shared memory (PERF_NOTES session 19). One group an SM alone, with two
  // blocks fitting an SM, read 68%: see one_block_an_sm.
  const bool rms_wide_fast = !layer && element_bytes == 2 && fast_memory && plan.threads == kStagedThreads &&
                             plan.packs == 2 && plan.cluster == 1;
  const bool one_an_sm = rms_wide_fast || ((layer || rms_as_layer || rms_f32_fast) && plan.cluster == 1 &&
                                           dim <= kFinishColumns && plan.packs >= 2 && plan.threads >= 256);
  // Whole-row blocks of 4 packs a thread and up to 256 threads (16-bit rows of 4104-8192 columns,
  // f32 of 2052-4096) take their rows two a step, when the one more stage fits. Their four stages
  // of up to 32 KB leave room for one block an SM. bf16 8192 columns measured LayerNorm 76 -> 78-79%
  // and RMSNorm 80 -> 83-84% of copy, RMSNorm f32 4096 84 -> 86-87% (a row a step at one group an
  // SM: 63-64 / 73-74 / 87-89%). LayerNorm f32 4096 (one group an SM already) lost 2 points, and the
  // other shapes (f16, longer slices) are not measured, so they keep a row a step (H100, PERF_NOTES
  // session 11). 16-bit one-group-an-SM blocks of 2 packs a thread (2049-4096 columns) take two rows
  // a step too: LayerNorm bf16 4096 measured 58 -> 63% of copy on the H200, where a row a step leaves
  // the SMs, not DRAM, setting the pace, and 75/75 -> 76/76% on the H100 (PERF_NOTES session 12).
  const bool pairs = (plan.packs == 4 && !one_an_sm) || (element_bytes == 2 && plan.packs == 2 && one_an_sm);
  const long long stage_bytes = plan.smem / kStages;
  const bool two_rows = pairs && plan.threads <= kPreferredStagedThreads && plan.cluster == 1 &&
                        stage_bytes * (kStages + 1) + kRingRoom + 2048 <= smem_room;
  const long long stages = two_rows ? stage_bytes * (kStages + 1) : plan.smem;
  return {two_rows ? 2 : 1, one_an_sm ? 1 : 2, static_cast<int>(stages + kRingRoom)};
}

// The dynamic shared memory that keeps a block of a one-group-an-SM schedule alone on its SM: with
// room for two, the block scheduler placed two blocks on some SMs and none on others (RMSNorm bf16 8192 on
// the H200: 18.4 warps active an SM on average for 16-warp blocks, 68% of copy against 82% alone;
// PERF_NOTES session 19). More than half of what an SM holds, less what every block takes besides
// (`reserved` by the driver and the kernel's `static_bytes`); never less than the schedule's own.
constexpr long long one_block_an_sm(long long schedule_bytes, long long sm_bytes, long long reserved,
                                    long long static_bytes) {
  const long long alone = (sm_bytes / 2 - reserved - static_bytes + 16) / 16 * 16;
  return schedule_bytes > alone ? schedule_bytes : alone;
}

}  // namespace ignis::cuda::norm
