#pragma once
// How many blocks of a row-cached kernel (row_cache.cuh) share an SM: host arithmetic, kept apart
// from the CUDA code so the host tests check it on any machine.
//
// Why a limit: a block holds its slice of a row in shared memory and keeps the whole slice's copies
// in flight at once. On the H200 the bf16 softmax forward read 80% of copy bandwidth at 8192 columns
// with 13 blocks (208 KB of rows) an SM and 84-85% with 8 (128 KB); at 16384 columns 88% with 6
// (192 KB) and 91% with 4 (128 KB). 6 blocks of 8192 columns (96 KB) read 81.5% and 4 (64 KB) 70%.
// Where it does not help, it is not applied: 4096 columns (8 KB slices) read 80% at 8, 16 and 24
// blocks; 32000 columns (64 KB) lost 2.5 points at 2 blocks against 3; the f32 forward, the
// backward (two tensors a slice) and cross-entropy lost 1-6 points at 128 KB (PERF_NOTES session 21).
// So only the 16-bit forward's slices of 16-32 KB take the pad.
#include "cuda/common/sm_share.h"

namespace ignis::cuda {

// Bytes of row slices an SM holds at once, at most, where a slice takes the pad.
constexpr long long kResidentRowBytes = 128 * 1024;
// The slices that take it.
constexpr long long kPaddedSliceMin = 16 * 1024;
constexpr long long kPaddedSliceMax = 32 * 1024;

constexpr bool takes_row_pad(long long slice_bytes) {
  return slice_bytes >= kPaddedSliceMin && slice_bytes <= kPaddedSliceMax;
}

// The dynamic shared memory a block of `slice_bytes` of rows asks for so that no more than
// kResidentRowBytes of rows share an SM: its slice, padded to an equal share of the SM when the
// slice takes the pad and more blocks than that would fit. `sm_bytes`: shared memory an SM;
// `reserved`: what the system takes from each block; `static_bytes`: the kernel's static shared
// memory; `max_blocks`: the blocks an SM holds at most. The share is smem_for_blocks_an_sm's
// (sm_share.h), exact for the pad's counts of 4-8.
constexpr long long resident_row_smem(long long slice_bytes, long long sm_bytes, long long reserved,
                                      long long static_bytes, long long max_blocks) {
  if (!takes_row_pad(slice_bytes)) return slice_bytes;
  const long long by_memory = sm_bytes / (round_to_granule(slice_bytes + static_bytes) + reserved);
  const long long fitting = by_memory < max_blocks ? by_memory : max_blocks;
  const long long wanted = kResidentRowBytes / slice_bytes;
  if (fitting <= wanted) return slice_bytes;
  const long long share = smem_for_blocks_an_sm(wanted, sm_bytes, reserved, static_bytes);
  return share > slice_bytes ? share : slice_bytes;
}

}  // namespace ignis::cuda
