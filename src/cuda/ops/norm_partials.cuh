#pragma once
// The norm backward's weight (and bias) gradients from partial rows: every group of rows leaves one
// fp32 partial row a sum ([groups, dim]); whole-row blocks of a cluster may first add theirs through
// distributed shared memory (merge_partials), and the rows are summed over groups in a fixed order
// (sum_columns: inside the backward's own cooperative launch, or in sum_partials, a second launch).
// No atomics: the same bits whatever the timing.
#include <cuda_runtime.h>

#include <cooperative_groups.h>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/ops/norm_common.cuh"

namespace ignis::cuda::norm {

constexpr int kSumSlices = 32;  // row slices of the partial-sum kernel
constexpr int kSumColumns = 32;  // columns a block of the partial-sum kernel

// Component-wise sums, for cluster_reduce and the looping backward's per-pack sums.
struct Add {
  template <class S>
  __device__ S operator()(S a, S b) const {
    if constexpr (std::is_same_v<S, float>) return a + b;
    else if constexpr (std::is_same_v<S, float2>) return {a.x + b.x, a.y + b.y};
    else return {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w};
  }
};

// The partial sums of the `merge` blocks of a cluster (each with its own rows, whole rows a
// block: count = packs, first = 0) added through distributed shared memory into one partial row:
// each block puts its dweight (and dbias) row into its own shared memory, and block r adds part r
// of the rows over the blocks in rank order (the same bits whatever the timing) and writes it to
// row blockIdx.x / merge of dw_part / db_part. merge times fewer partial rows to write and to
// read back. smem: the block's stages, at least 2 * dim floats (a stage holds dim x and dy).
// dw_part, db_part: [groups / merge, dim] (db_part null for RMSNorm).
template <Kind kKind, int P, int V>
__device__ void merge_partials(const float (&dw)[P][V], const float (&db)[P][V], unsigned char* smem,
                               float* __restrict__ dw_part, float* __restrict__ db_part, int dim, int merge) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  float* mine = reinterpret_cast<float*>(smem);  // [sums][dim]
  __syncthreads();  // other threads may still read their last row's stage (every copy has landed)
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int k = tid + p * threads;
    if (k * V >= dim) continue;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      mine[k * V + j] = dw[p][j];
      if constexpr (kKind == Kind::layer) mine[dim + k * V + j] = db[p][j];
    }
  }
  cluster.sync();
  constexpr int kSums = kKind == Kind::layer ? 2 : 1;
  const int quads = kSums * dim / 4;
  const int part = (quads + merge - 1) / merge;
  const int rank = static_cast<int>(cluster.block_rank());
  const int end = min(quads, (rank + 1) * part);
  const long long row = static_cast<long long>(blockIdx.x / merge) * dim;
  for (int q = rank * part + tid; q < end; q += threads) {
    float4* local = reinterpret_cast<float4*>(mine) + q;
    float4 sum = *cluster.map_shared_rank(local, 0);
    for (int r = 1; r < merge; ++r) sum = Add{}(sum, *cluster.map_shared_rank(local, r));
    const int c = 4 * q;
    float* out = c < dim ? dw_part + row + c : db_part + row + (c - dim);
    *reinterpret_cast<float4*>(out) = sum;
  }
  cluster.sync();  // the other blocks may still be reading this block's row
#else
  __trap();
#endif
}

// out[c] = sum over p < parts of part[p * dim + c] for the C columns from c0, in a fixed order
// (the same bits whatever the timing): the block's threads form slices of C / W lanes (W columns
// each, float4 loads when W = 4, which needs dim % 4 == 0); slice y adds partial rows y, y +
// slices, ..., kBatch loads in flight a thread (the rows are in L2, just written: the time is
// their latency, so the loads of a batch all issue before the first add). The slices of a warp are
// then added by shuffles, and thread t < C adds column t's warp sums in order. The block size is a
// multiple of 32. tile: (blockDim.x / 32) x (C + 1) floats of shared memory.
// part: [parts, dim]; out: [dim], columns [c0, c0 + C) written.
template <class T, int W, int C>
__device__ void sum_columns(const float* __restrict__ part, long long parts, int dim, int c0, T* __restrict__ out,
                            float* tile) {
  static_assert(C % W == 0 && 32 % (C / W) == 0, "a slice's lanes divide a warp");
  constexpr int kLanes = C / W;
  constexpr int kBatch = 32 / W;
  using Load = std::conditional_t<W == 4, float4, float>;
  const int t = static_cast<int>(threadIdx.x), slices = static_cast<int>(blockDim.x) / kLanes;
  const int y = t / kLanes, c = c0 + (t % kLanes) * W;
  float s[W] = {};
  if (c < dim) {
    for (long long p0 = y; p0 < parts; p0 += static_cast<long long>(kBatch) * slices) {
      Load v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const long long p = p0 + static_cast<long long>(b) * slices;
        v[b] = p < parts ? *reinterpret_cast<const Load*>(part + p * dim + c) : Load{};
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if constexpr (W == 4) {
          s[0] += v[b].x;
          s[1] += v[b].y;
          s[2] += v[b].z;
          s[3] += v[b].w;
        } else {
          s[0] += v[b];
        }
      }
    }
  }
#pragma unroll
  for (int offset = kLanes; offset < 32; offset *= 2)
#pragma unroll
    for (int j = 0; j < W; ++j) s[j] += __shfl_xor_sync(kFullMask, s[j], offset);
  const int lane = t % 32, warp = t / 32;
  if (lane < kLanes)
#pragma unroll
    for (int j = 0; j < W; ++j) tile[warp * (C + 1) + lane * W + j] = s[j];
  __syncthreads();
  if (t < C && c0 + t < dim) {
    float total = 0.0f;
    for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) total += tile[w * (C + 1) + t];
    out[c0 + t] = from_float<T>(total);
  }
  __syncthreads();  // the tile is free for the caller's next columns
}

// Shared-memory bytes of sum_columns' tile for blocks of `threads` threads and chunks of `columns`.
constexpr long long sum_tile_bytes(long long threads, long long columns = kSumColumns) {
  return threads / 32 * (columns + 1) * 4;
}

// dweight[c] = sum over p of dw_part[p, c] (blockIdx.y 0), dbias from db_part likewise (1), in a fixed
// order: a block takes kSumColumns columns (so that even 4096-wide rows give every SM a block) in
// kSumSlices slices of threads (sum_columns). dw_part, db_part: [parts, dim]; dweight, dbias: [dim].
template <class T, int W>
__global__ void __launch_bounds__(kSumColumns / W * kSumSlices)
    sum_partials(const float* __restrict__ dw_part, const float* __restrict__ db_part, int parts, int dim,
                 T* __restrict__ dweight, T* __restrict__ dbias) {
  __shared__ float tile[sum_tile_bytes(kSumColumns / W * kSumSlices) / sizeof(float)];
  pdl_wait();  // may start while the backward that writes the partial rows still runs
  const bool bias = blockIdx.y != 0;
  sum_columns<T, W, kSumColumns>(bias ? db_part : dw_part, parts, dim, static_cast<int>(blockIdx.x) * kSumColumns,
                                 bias ? dbias : dweight, tile);
}

// The partial rows' sums into dweight (and dbias), zeros when there are no parts.
// dw_part, db_part: [parts, dim]; dweight, dbias: [dim] (db_part, dbias null for RMSNorm).
template <class T>
void sum_partials_into(const float* dw_part, const float* db_part, long long parts, long long dim, T* dweight,
                       T* dbias, cudaStream_t s) {
  const unsigned sums = dbias != nullptr ? 2 : 1;
  const dim3 grid(static_cast<unsigned>(ceil_div(dim, kSumColumns)), sums);
  // Launched to overlap the backward before it (which calls pdl_trigger): its blocks take the SMs
  // as the backward's groups finish, instead of after a launch gap (~1 point of copy at 8192-16384
  // bf16 columns, H100 PERF_NOTES session 8).
  const bool wide = dim % 4 == 0;  // float4 loads
  launch_overlapping(wide ? sum_partials<T, 4> : sum_partials<T, 1>, grid,
                     dim3(wide ? kSumColumns / 4 * kSumSlices : kSumColumns * kSumSlices), 0, s, true, dw_part,
                     db_part, static_cast<int>(parts), static_cast<int>(dim), dweight, dbias);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace ignis::cuda::norm
