#pragma once
// What the RMSNorm/LayerNorm kernels of norm_forward.cu and norm_backward.cu share: the row
// statistics (LayerNorm's Moments and Chan's merge), the warp and block sums with the same bits in
// every thread, the looping statistics pass, and the launch helpers. RMSNorm is the LayerNorm
// computation with the mean fixed at 0 and no bias.
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/reduce.cuh"
#include "ignis/error.h"

namespace ignis::cuda::norm {

enum class Kind { rms, layer };

// A LayerNorm row's statistics over some of its columns: their count, their mean and the sum of
// their squared deviations from that mean. n = 0 (all zero) is the empty set.
struct Moments {
  float n;
  float mean;
  float m2;
};

// Chan's parallel merge of the statistics of two disjoint column sets: no sum of squares, so a
// large common offset does not cancel. The weight f = nb / n is exactly 0 when b is empty and
// exactly 1 when a is empty, so an empty side leaves the other's bits unchanged (the tail warps
// and padded threads of a row must not perturb it); otherwise it is the fast reciprocal division
// (2 ulp: a weight), as the IEEE division's slow-path call made backward_loop spill. Not symmetric
// in bits: callers order the operands by position (lower lane / warp first) so that both ends of
// a shuffle get the same bits.
__device__ __forceinline__ Moments merge(Moments a, Moments b) {
  const float n = a.n + b.n;
  const float f = a.n == 0.0f ? 1.0f : __fdividef(b.n, n);  // b empty: 0 * (1 / n) = 0
  const float delta = b.mean - a.mean;
  return {n, a.mean + delta * f, a.m2 + b.m2 + delta * delta * (a.n * f)};
}

// One butterfly step: v combined with lane (lane ^ offset)'s v, the same bits in both lanes (the
// sums: addition is commutative; Moments: the merge takes the lower lane's side first).
__device__ __forceinline__ float xor_step(float v, int offset) { return v + __shfl_xor_sync(kFullMask, v, offset); }
__device__ __forceinline__ float2 xor_step(float2 v, int offset) {
  return {xor_step(v.x, offset), xor_step(v.y, offset)};
}
__device__ __forceinline__ Moments xor_step(Moments v, int offset) {
  const Moments other = {__shfl_xor_sync(kFullMask, v.n, offset), __shfl_xor_sync(kFullMask, v.mean, offset),
                         __shfl_xor_sync(kFullMask, v.m2, offset)};
  const bool upper = threadIdx.x & offset;  // select the operands, then merge once
  return merge(upper ? other : v, upper ? v : other);
}

// The warp's sum (Moments: merge) in every lane, the same bits in every lane.
template <class S>
__device__ __forceinline__ S warp_sum(S v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = xor_step(v, offset);
  return v;
}

// The block's sum of its warps' values (v: the same in every lane of a warp) in every thread,
// with the same bits everywhere: one value a warp into scratch, ONE barrier, then every aligned
// group of `span` lanes (span: the power of two >= warps) reduces all warps' values by a
// butterfly of log2(span) steps, the same operations on the same operands in every group.
// scratch: 32 S of shared memory, one of TWO buffers that consecutive calls alternate between
// (buffer i & 1 for the block's i-th reduction), which is why no barrier is needed before the
// write: a thread writes buffer b in reduction i + 2 only after it passed the barrier of
// reduction i + 1, which no thread reaches before it has finished reading buffer b in reduction i
// (every thread of the block makes the same reductions in the same order). The other buffer,
// written by reduction i + 1 meanwhile, is never read by reduction i.
template <class S>
__device__ S sum_over_warps(S v, S* scratch) {
  const int lane = threadIdx.x % 32;
  const int warps = static_cast<int>(blockDim.x / 32);
  if (lane == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  int span = 1;
  while (span < warps) span *= 2;
  const int w = lane & (span - 1);
  v = w < warps ? scratch[w] : S{};
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2)
    if (offset < span) v = xor_step(v, offset);  // the same branch in the whole block
  return v;
}

// The whole block's sum (Moments: merge) in every thread, with the same bits everywhere.
// scratch: as for sum_over_warps.
template <class S>
__device__ S block_sum(S v, S* scratch) {
  return sum_over_warps(warp_sum(v), scratch);
}

struct RowStats {
  float mean;  // 0 for RMSNorm
  float rstd;
};

// What a thread contributes to its row's one reduction: LayerNorm's Moments, RMSNorm's sum x^2.
template <Kind kKind>
using Partial = std::conditional_t<kKind == Kind::layer, Moments, float>;

// The row's statistics from the group's reduction of the partials.
template <Kind kKind>
__device__ __forceinline__ RowStats row_stats(Partial<kKind> all, int dim, float eps) {
  if constexpr (kKind == Kind::layer) return {all.mean, rsqrtf(all.m2 / static_cast<float>(dim) + eps)};
  else return {0.0f, rsqrtf(all / static_cast<float>(dim) + eps)};
}

// Statistics of a row read from memory in one pass and one block reduction. LayerNorm: each pack's
// Moments (two passes over its registers) merged into the thread's running Moments, so the row is
// read once here and once more by the caller's write pass (a two-pass mean-then-deviations would
// read it a third time). scratch: this row's buffer.
// in: [dim], one row.
template <Kind kKind, class T, int V>
__device__ RowStats looped_stats(const T* in, int dim, float eps, Partial<kKind>* scratch) {
  const int step = blockDim.x * V;
  Partial<kKind> part{};
  for (int c = threadIdx.x * V; c < dim; c += step) {
    float v[V];
    load_floats<T, V>(in + c, v);
    if constexpr (kKind == Kind::layer) {
      float s = 0.0f, m2 = 0.0f;
#pragma unroll
      for (int j = 0; j < V; ++j) s += v[j];
      const float mean = s * (1.0f / static_cast<float>(V));  // V is a power of two: exact
#pragma unroll
      for (int j = 0; j < V; ++j) m2 += (v[j] - mean) * (v[j] - mean);
      part = merge(part, Moments{static_cast<float>(V), mean, m2});
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) part += v[j] * v[j];
    }
  }
  return row_stats<kKind>(block_sum(part, scratch), dim, eps);
}

// Threads for a looping kernel: a few packs each, between one warp and 1024.
inline int loop_threads(long long dim, int v) {
  const long long packs = (dim + v - 1) / v;
  int threads = 32;
  while (threads < 1024 && threads * 4LL < packs) threads *= 2;
  return threads;
}

inline unsigned grid_for(long long blocks) { return static_cast<unsigned>(std::min<long long>(blocks, INT_MAX)); }

inline bool all_aligned(std::initializer_list<const void*> ptrs, int bytes) {
  for (const void* p : ptrs)
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % bytes != 0) return false;
  return true;
}

// The 16-byte pack width when dim and every pointer allow it, else 1.
template <class T>
inline int pack_width(long long dim, std::initializer_list<const void*> ptrs) {
  constexpr int V = 16 / sizeof(T);
  return dim % V == 0 && all_aligned(ptrs, 16) ? V : 1;
}

inline void check_dim_fits(long long dim, const char* where) {
  check_arg(dim <= INT_MAX / 2, where, "x.shape[1]", "<= 2^30 on CUDA", dim);
}

}  // namespace ignis::cuda::norm
