// RMSNorm and LayerNorm over rows, forward and backward.
//
// Forward: a row is owned by one warp (short rows, 4 rows per block) or by one block (long rows).
// Each thread loads its part of the row once, up to kForwardPacks 16-byte packs kept raw in
// registers (32 registers whatever the dtype, so a 64-thread block holds a 4096-element bf16
// row and many blocks share an SM: their loads cover each other's reductions); the statistics
// are fp32 group reductions over those registers (LayerNorm: the mean, then the squared
// deviations, so a large common offset does not cancel); the normalised row is written once.
// x and weight are read once per row (weight from L1/L2 after the first row), y written once.
// Rows that are too long for registers, or whose length/alignment rules out 16-byte packs, take
// a looping kernel that reads the row again for each pass (from L2 for the later passes).
//
// Backward: a block owns several rows at once, one row per group of `group` threads (a power of
// two from 32 to 1024); each thread holds its packs of x and dy raw in registers and, for rows
// of up to 1024 packs (one a thread), loads the group's next row before reducing the current
// one, so DRAM stays busy through the reductions even at one block per SM. Each row
// recomputes its statistics from x (no saved rstd), then
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight (RMSNorm: no mean(g)
// term and mean 0). The sums need two group reductions (LayerNorm: sum x; then sum (x - mean)^2,
// sum g and sum g (x - mean) together, mean(g * xhat) being rstd * mean(g (x - mean))) or one
// (RMSNorm: sum x^2 and sum g x). dweight = sum over rows of dy * xhat and dbias = sum of dy are
// accumulated in fp32 in shared memory slots private to each thread (a thread's columns are the
// same in every row), added over the block's groups into one fp32 partial row per block in a
// [blocks, dim] workspace, and summed over blocks in a fixed order by a second kernel: no
// atomics, deterministic. One block per SM keeps that workspace small.
// RMSNorm is the LayerNorm computation with the mean fixed at 0 and no bias.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/ops/norm.h"

namespace ignis::cuda {
namespace {

enum class Kind { rms, layer };

constexpr int kWarpRowThreads = 128;  // forward: 4 warps, one row each
constexpr int kForwardPacks = 4;  // most 16-byte packs of a row one thread keeps, forward
// Backward blocks: rows of up to 1024 packs take one pack a thread (x and dy raw, 8 registers,
// and the next row's 8 while prefetching) in 1024-thread blocks; longer rows take
// kLongBackwardThreads threads with K > 1 packs each and no prefetch (more would spill at the
// 64 registers of a 1024-thread block). The shared accumulators take 4 bytes an element per sum:
// at most 32 elements a thread (128 KB of dweight + dbias).
constexpr int kBackwardThreads = 1024;
constexpr int kLongBackwardThreads = 512;
constexpr int kMaxBackwardPacks = 4;  // f32 K = 8 needs 128+ registers and spills
__host__ __device__ constexpr int backward_threads(int k) { return k == 1 ? kBackwardThreads : kLongBackwardThreads; }
constexpr int kSumSlices = 16;  // row slices of the partial-sum kernel

__device__ __forceinline__ float add(float a, float b) { return a + b; }
__device__ __forceinline__ float2 add(float2 a, float2 b) { return {a.x + b.x, a.y + b.y}; }
__device__ __forceinline__ float3 add(float3 a, float3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }

__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, Sum{}); }
__device__ __forceinline__ float2 warp_sum(float2 v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v.x += __shfl_xor_sync(kFullMask, v.x, offset);
    v.y += __shfl_xor_sync(kFullMask, v.y, offset);
  }
  return v;
}
__device__ __forceinline__ float3 warp_sum(float3 v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v.x += __shfl_xor_sync(kFullMask, v.x, offset);
    v.y += __shfl_xor_sync(kFullMask, v.y, offset);
    v.z += __shfl_xor_sync(kFullMask, v.z, offset);
  }
  return v;
}

// Sum over `warps` consecutive warps starting at warp `first`, returned to each of their
// threads; the whole block must call it. scratch: 32 values of shared memory.
template <class S>
__device__ S warps_sum(S v, S* scratch, int first, int warps) {
  v = warp_sum(v);
  if (warps == 1) return v;
  __syncthreads();  // scratch may still be read by the previous reduction
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[first];
  for (int w = 1; w < warps; ++w) v = add(v, scratch[first + w]);
  return v;
}

// Sum over the whole block, returned to every thread. scratch: 32 values of shared memory.
template <class S>
__device__ S block_sum(S v, S* scratch) {
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by the previous reduction
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) v = add(v, scratch[w]);
  return v;
}

// The threads that own one row in the forward: a warp (kWarp) or the whole block. Pack k of a
// thread starts at column (rank + k * size) * V in every row, so a thread's columns never change.
template <bool kWarp>
struct RowGroup {
  __device__ static int size() { return kWarp ? 32 : static_cast<int>(blockDim.x); }
  __device__ static int rank() { return kWarp ? threadIdx.x % 32 : threadIdx.x; }
  __device__ static int per_block() { return kWarp ? blockDim.x / 32 : 1; }
  __device__ static long long first_row() {
    return static_cast<long long>(blockIdx.x) * per_block() + (kWarp ? threadIdx.x / 32 : 0);
  }
  __device__ static long long row_stride() { return static_cast<long long>(gridDim.x) * per_block(); }
  template <int V>
  __device__ static int column(int k) {
    return (rank() + k * size()) * V;
  }
  template <class S>
  __device__ static S sum(S v, S* scratch) {
    if constexpr (kWarp) return warp_sum(v);
    else return block_sum(v, scratch);
  }
};

struct RowStats {
  float mean;  // 0 for RMSNorm
  float rstd;
};

template <class T, int V>
__device__ __forceinline__ void unpack(const Pack<T, V>& p, float (&v)[V]) {
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = to_float(p.v[j]);
}

// Loads the packs of one row at columns column(k), zeros past dim.
template <class T, int V, int K, class Column>
__device__ __forceinline__ void load_row(const T* in, int dim, Column column, Pack<T, V> (&p)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = column(k);
    if (c < dim) {
      p[k] = *reinterpret_cast<const Pack<T, V>*>(in + c);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) p[k].v[j] = from_float<T>(0.0f);
    }
  }
}

// Statistics of a row held in registers; columns at or past dim hold zeros.
template <Kind kKind, class G, class T, int K, int V>
__device__ RowStats register_stats(const Pack<T, V> (&p)[K], int dim, float eps, float* scratch) {
  float mean = 0.0f;
  if constexpr (kKind == Kind::layer) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) s += to_float(p[k].v[j]);
    mean = G::sum(s, scratch) / static_cast<float>(dim);
  }
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (G::template column<V>(k) >= dim) continue;  // the zero padding is not part of the row
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float d = to_float(p[k].v[j]) - mean;
      sq += d * d;
    }
  }
  return {mean, rsqrtf(G::sum(sq, scratch) / static_cast<float>(dim) + eps)};
}

// Statistics of a row read from memory, one pass per reduction; a block owns the row.
template <Kind kKind, class T, int V>
__device__ RowStats looped_stats(const T* in, int dim, float eps, float* scratch) {
  const int step = blockDim.x * V;
  float mean = 0.0f;
  if constexpr (kKind == Kind::layer) {
    float s = 0.0f;
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float v[V];
      load_floats<T, V>(in + c, v);
#pragma unroll
      for (int j = 0; j < V; ++j) s += v[j];
    }
    mean = block_sum(s, scratch) / static_cast<float>(dim);
  }
  float sq = 0.0f;
  for (int c = threadIdx.x * V; c < dim; c += step) {
    float v[V];
    load_floats<T, V>(in + c, v);
#pragma unroll
    for (int j = 0; j < V; ++j) sq += (v[j] - mean) * (v[j] - mean);
  }
  return {mean, rsqrtf(block_sum(sq, scratch) / static_cast<float>(dim) + eps)};
}

// y = (v - mean) * rstd * weight (+ bias) for one pack at column c, written to out + c.
template <Kind kKind, class T, int V>
__device__ __forceinline__ void write_normalized(float (&v)[V], RowStats s, const T* weight, const T* bias, T* out,
                                                 int c) {
  float w[V], b[V] = {};
  load_floats<T, V>(weight + c, w);
  if constexpr (kKind == Kind::layer) load_floats<T, V>(bias + c, b);
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = (v[j] - s.mean) * s.rstd * w[j] + b[j];
  store_floats<T, V>(out + c, v);
}

template <Kind kKind, class T, int V, int K, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kWarpRowThreads : 1024)
    forward_regs(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                 T* __restrict__ y, long long rows, int dim, float eps) {
  using G = RowGroup<kWarp>;
  __shared__ float scratch[32];
  for (long long row = G::first_row(); row < rows; row += G::row_stride()) {
    Pack<T, V> p[K];
    load_row<T, V, K>(x + row * dim, dim, [](int k) { return G::template column<V>(k); }, p);
    const RowStats s = register_stats<kKind, G>(p, dim, eps, scratch);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = G::template column<V>(k);
      if (c >= dim) continue;
      float v[V];
      unpack(p[k], v);
      write_normalized<kKind, T, V>(v, s, weight, bias, y + row * dim, c);
    }
  }
}

template <Kind kKind, class T, int V>
__global__ void __launch_bounds__(1024) forward_loop(const T* __restrict__ x, const T* __restrict__ weight,
                                                     const T* __restrict__ bias, T* __restrict__ y, long long rows,
                                                     int dim, float eps) {
  __shared__ float scratch[32];
  const int step = blockDim.x * V;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * dim;
    const RowStats s = looped_stats<kKind, T, V>(in, dim, eps, scratch);
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float v[V];
      load_floats<T, V>(in + c, v);
      write_normalized<kKind, T, V>(v, s, weight, bias, y + row * dim, c);
    }
  }
}

// One pack of the looping backward at column c: turns x into xhat and dy into g = dy * weight,
// adds dy * xhat and dy to the thread's partial sums, and returns (sum g, sum g * xhat).
template <Kind kKind, class T, int V>
__device__ __forceinline__ float2 backward_pack(float (&xv)[V], float (&gv)[V], RowStats s, const T* weight, int c,
                                                float (&dw)[V], float (&db)[V]) {
  float w[V];
  load_floats<T, V>(weight + c, w);
  float2 sums = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < V; ++j) {
    xv[j] = (xv[j] - s.mean) * s.rstd;
    dw[j] += gv[j] * xv[j];
    if constexpr (kKind == Kind::layer) db[j] += gv[j];
    gv[j] *= w[j];
    sums.x += gv[j];
    sums.y += gv[j] * xv[j];
  }
  return sums;
}

// dx for one pack from xhat and g, given the row's mean(g) and mean(g * xhat).
template <Kind kKind, class T, int V>
__device__ __forceinline__ void write_dx(const float (&xh)[V], const float (&gv)[V], RowStats s, float2 means, T* out,
                                         int c) {
  float d[V];
  const float mean_g = kKind == Kind::layer ? means.x : 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) d[j] = s.rstd * (gv[j] - mean_g - xh[j] * means.y);
  store_floats<T, V>(out + c, d);
}

// The backward's row groups: blockDim.x / group groups of `group` threads, each owning one row
// per step. Thread columns as in RowGroup, with rank = threadIdx.x % group.
struct BackGroup {
  int group;
  __device__ int rank() const { return static_cast<int>(threadIdx.x) % group; }
  __device__ int index() const { return static_cast<int>(threadIdx.x) / group; }
  __device__ int count() const { return static_cast<int>(blockDim.x) / group; }
  template <int V>
  __device__ int column(int k) const {
    return (rank() + k * group) * V;
  }
  template <class S>
  __device__ S sum(S v, S* scratch) const {
    return warps_sum(v, scratch, index() * (group / 32), group / 32);
  }
};

// Slot (k, q) of this thread's shared accumulators: float4 q of pack k. Thread-private, laid out
// so that a warp's float4 accesses of one slot are consecutive (no bank conflicts).
template <int V>
__device__ __forceinline__ float4& acc_slot(float4* acc, int k, int q) {
  return acc[(k * (V / 4) + q) * blockDim.x + threadIdx.x];
}

// The sum over the block's groups, in group order, of accumulator `slot` of group 0.
__device__ __forceinline__ float4 groups_total(const float4* acc, int slot, const BackGroup& G) {
  float4 t = acc[slot];
  for (int i = 1; i < G.count(); ++i) {
    const float4 a = acc[slot + i * G.group];
    t = make_float4(t.x + a.x, t.y + a.y, t.z + a.z, t.w + a.w);
  }
  return t;
}

template <Kind kKind, class T, int V, int K>
__global__ void __launch_bounds__(backward_threads(K))
    backward_regs(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                  T* __restrict__ dx, float* __restrict__ dw_part, float* __restrict__ db_part, long long rows,
                  int dim, float eps, int group) {
  static_assert(V % 4 == 0, "accumulator slots are float4");
  constexpr bool kPrefetch = K == 1;  // see backward_threads
  constexpr int kSlots = K * (V / 4);
  extern __shared__ float4 acc_w[];  // [kSlots][blockDim.x], then acc_b likewise (LayerNorm)
  float4* acc_b = acc_w + kSlots * blockDim.x;
  __shared__ float scratch[32];
  __shared__ float2 scratch2[32];
  __shared__ float3 scratch3[32];
  const BackGroup G{group};
  const auto column = [&](int k) { return G.column<V>(k); };
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      acc_slot<V>(acc_w, k, q) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if constexpr (kKind == Kind::layer) acc_slot<V>(acc_b, k, q) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }

  // Every group runs the same number of steps (the reductions synchronize the block); a group
  // whose row is past the end works on zeros and stores and accumulates nothing.
  const long long step = static_cast<long long>(gridDim.x) * G.count();
  long long row = static_cast<long long>(blockIdx.x) * G.count() + G.index();
  Pack<T, V> xp[K], gp[K];
  if (row < rows) {
    load_row<T, V, K>(x + row * dim, dim, column, xp);
    load_row<T, V, K>(dy + row * dim, dim, column, gp);
  }
  for (long long base = static_cast<long long>(blockIdx.x) * G.count(); base < rows; base += step, row += step) {
    const bool active = row < rows;
    if (!active) {
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < V; ++j) xp[k].v[j] = gp[k].v[j] = from_float<T>(0.0f);
    }
    Pack<T, V> xn[K], gn[K];
    if constexpr (kPrefetch) {
      if (row + step < rows) {
        load_row<T, V, K>(x + (row + step) * dim, dim, column, xn);
        load_row<T, V, K>(dy + (row + step) * dim, dim, column, gn);
      }
    }

    float mean = 0.0f;
    if constexpr (kKind == Kind::layer) {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < V; ++j) s += to_float(xp[k].v[j]);
      mean = G.sum(s, scratch) / static_cast<float>(dim);
    }
    // (sum (x - mean)^2, sum g, sum g (x - mean)); the padding has x = dy = 0 but x - mean != 0.
    float3 sums = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = column(k);
      if (c >= dim) continue;
      float xv[V], gv[V], w[V];
      unpack(xp[k], xv);
      unpack(gp[k], gv);
      load_floats<T, V>(weight + c, w);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float d = xv[j] - mean;
        const float g = gv[j] * w[j];
        sums.x += d * d;
        sums.y += g;
        sums.z += g * d;
      }
    }
    if constexpr (kKind == Kind::layer) {
      sums = G.sum(sums, scratch3);
    } else {
      const float2 s2 = G.sum(make_float2(sums.x, sums.z), scratch2);
      sums = {s2.x, 0.0f, s2.y};
    }
    const float inv_dim = 1.0f / static_cast<float>(dim);
    const float rstd = rsqrtf(sums.x * inv_dim + eps);
    const float mean_g = kKind == Kind::layer ? sums.y * inv_dim : 0.0f;
    const float mean_gx = rstd * sums.z * inv_dim;  // mean(g * xhat)

#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = column(k);
      if (c >= dim) continue;
      float xv[V], gv[V], w[V], d[V];
      unpack(xp[k], xv);
      unpack(gp[k], gv);
      load_floats<T, V>(weight + c, w);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xv[j] = (xv[j] - mean) * rstd;  // xhat
        d[j] = rstd * (gv[j] * w[j] - mean_g - xv[j] * mean_gx);
      }
      if (!active) continue;  // with eps = 0 a zero row's xhat is NaN: keep it out of the sums
      store_floats<T, V>(dx + row * dim + c, d);
#pragma unroll
      for (int q = 0; q < V / 4; ++q) {
        float4& a = acc_slot<V>(acc_w, k, q);
        a.x += gv[4 * q] * xv[4 * q];
        a.y += gv[4 * q + 1] * xv[4 * q + 1];
        a.z += gv[4 * q + 2] * xv[4 * q + 2];
        a.w += gv[4 * q + 3] * xv[4 * q + 3];
        if constexpr (kKind == Kind::layer) {
          float4& b = acc_slot<V>(acc_b, k, q);
          b.x += gv[4 * q];
          b.y += gv[4 * q + 1];
          b.z += gv[4 * q + 2];
          b.w += gv[4 * q + 3];
        }
      }
    }
    if constexpr (kPrefetch) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        xp[k] = xn[k];
        gp[k] = gn[k];
      }
    } else if (row + step < rows) {
      load_row<T, V, K>(x + (row + step) * dim, dim, column, xp);
      load_row<T, V, K>(dy + (row + step) * dim, dim, column, gp);
    }
  }

  // The groups own the same columns: group 0 adds their slots in group order.
  __syncthreads();
  if (G.index() != 0) return;
  float4* pw = reinterpret_cast<float4*>(dw_part + static_cast<long long>(blockIdx.x) * dim);
  float4* pb = kKind == Kind::layer ? reinterpret_cast<float4*>(db_part + static_cast<long long>(blockIdx.x) * dim)
                                    : nullptr;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = column(k);
    if (c >= dim) continue;
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      const int slot = (k * (V / 4) + q) * blockDim.x + threadIdx.x;
      pw[c / 4 + q] = groups_total(acc_w, slot, G);
      if constexpr (kKind == Kind::layer) pb[c / 4 + q] = groups_total(acc_b, slot, G);
    }
  }
}

// Rows too long for registers: three passes per row (statistics, sums, dx). The block's
// partial row lives in the workspace; each column is read and written only by its owning thread.
template <Kind kKind, class T, int V>
__global__ void __launch_bounds__(1024)
    backward_loop(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                  T* __restrict__ dx, float* __restrict__ dw_part, float* __restrict__ db_part, long long rows,
                  int dim, float eps) {
  __shared__ float scratch[32];
  __shared__ float2 scratch2[32];
  const int step = blockDim.x * V;
  float* pw = dw_part + static_cast<long long>(blockIdx.x) * dim;
  float* pb = kKind == Kind::layer ? db_part + static_cast<long long>(blockIdx.x) * dim : nullptr;
  for (int c = threadIdx.x * V; c < dim; c += step)
#pragma unroll
    for (int j = 0; j < V; ++j) {
      pw[c + j] = 0.0f;
      if constexpr (kKind == Kind::layer) pb[c + j] = 0.0f;
    }
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * dim;
    const T* gr = dy + row * dim;
    const RowStats s = looped_stats<kKind, T, V>(xr, dim, eps, scratch);
    float2 sums = {0.0f, 0.0f};
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float xv[V], gv[V], dw[V] = {}, db[V] = {};
      load_floats<T, V>(xr + c, xv);
      load_floats<T, V>(gr + c, gv);
      sums = add(sums, backward_pack<kKind, T, V>(xv, gv, s, weight, c, dw, db));
    }
    sums = block_sum(sums, scratch2);
    const float2 means = {sums.x / static_cast<float>(dim), sums.y / static_cast<float>(dim)};
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float xv[V], gv[V], dw[V] = {}, db[V] = {};
      load_floats<T, V>(xr + c, xv);
      load_floats<T, V>(gr + c, gv);
      backward_pack<kKind, T, V>(xv, gv, s, weight, c, dw, db);
      write_dx<kKind, T, V>(xv, gv, s, means, dx + row * dim, c);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        pw[c + j] += dw[j];
        if constexpr (kKind == Kind::layer) pb[c + j] += db[j];
      }
    }
  }
}

// out[c] = sum over p of part[p, c], in a fixed order. Block (32, kSumSlices): 32 columns, each
// slice sums every kSumSlices-th partial row, then slice 0 adds the slices in order.
template <class T>
__global__ void sum_partials(const float* __restrict__ part, int parts, int dim, T* __restrict__ out) {
  __shared__ float tile[kSumSlices][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < dim)
    for (int p = threadIdx.y; p < parts; p += kSumSlices) s += part[static_cast<long long>(p) * dim + c];
  tile[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= dim) return;
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kSumSlices; ++i) total += tile[i][threadIdx.x];
  out[c] = from_float<T>(total);
}

int pow2_at_least(long long n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Forward: `warp` rows (a warp each, kWarpRowThreads per block) or a block of `threads` per
// row; `k` packs per thread, or 0 when the row does not fit kForwardPacks packs a thread.
struct ForwardPlan {
  bool warp;
  int threads;
  int k;
};

// The fewest threads that hold the row at kForwardPacks packs each (at least 64 for a block).
ForwardPlan plan_forward(long long dim, int v) {
  const long long packs = dim / v;
  if (packs <= 32LL * kForwardPacks) return {true, kWarpRowThreads, pow2_at_least((packs + 31) / 32)};
  const long long threads = std::max(64, pow2_at_least((packs + kForwardPacks - 1) / kForwardPacks));
  if (threads > 1024) return {false, 1024, 0};
  return {false, static_cast<int>(threads), pow2_at_least((packs + threads - 1) / threads)};
}

// Backward: a row per `group` threads (a power of two from 32 to 1024) with one pack each, or
// for longer rows a row per kLongBackwardThreads threads with kMaxBackwardPacks packs each;
// k = 0 when the row does not fit.
struct BackwardPlan {
  int group;
  int k;
};

BackwardPlan plan_backward(long long dim, int v) {
  const long long packs = dim / v;
  if (packs <= kBackwardThreads) return {std::max(32, pow2_at_least(packs)), 1};
  const bool fits = packs <= static_cast<long long>(kLongBackwardThreads) * kMaxBackwardPacks;
  return {kLongBackwardThreads, fits ? kMaxBackwardPacks : 0};
}

// Calls make(integral_constant<int, K>) for the runtime k in {1, 2, 4, 8} allowed by kMax;
// nullptr when k has no kernel.
template <int kMax, class Make>
auto with_k(int k, Make make) -> decltype(make(std::integral_constant<int, 1>{})) {
  switch (k) {
    case 1: return make(std::integral_constant<int, 1>{});
    case 2:
      if constexpr (2 <= kMax) return make(std::integral_constant<int, 2>{});
      break;
    case 4:
      if constexpr (4 <= kMax) return make(std::integral_constant<int, 4>{});
      break;
    case 8:
      if constexpr (8 <= kMax) return make(std::integral_constant<int, 8>{});
      break;
  }
  return nullptr;
}

// Threads for a looping kernel: a few packs each, between one warp and 1024.
int loop_threads(long long dim, int v) {
  const long long packs = (dim + v - 1) / v;
  int threads = 32;
  while (threads < 1024 && threads * 4LL < packs) threads *= 2;
  return threads;
}

unsigned grid_for(long long blocks) { return static_cast<unsigned>(std::min<long long>(blocks, INT_MAX)); }

bool all_aligned(std::initializer_list<const void*> ptrs, int bytes) {
  for (const void* p : ptrs)
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % bytes != 0) return false;
  return true;
}

// The 16-byte pack width when dim and every pointer allow it, else 1.
template <class T>
int pack_width(long long dim, std::initializer_list<const void*> ptrs) {
  constexpr int V = 16 / sizeof(T);
  return dim % V == 0 && all_aligned(ptrs, 16) ? V : 1;
}

void check_dim_fits(long long dim, const char* where) {
  check_arg(dim <= INT_MAX / 2, where, "x.shape[1]", "<= 2^30 on CUDA", dim);
}

template <class T>
using ForwardKernel = void (*)(const T*, const T*, const T*, T*, long long, int, float);

template <Kind kKind, class T>
void forward(const char* where, const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& y, float eps,
             Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = x.size(0), dim = x.size(1);
  check_dim_fits(dim, where);
  if (rows == 0) return;
  const T* xp = x.data_as<const T>();
  const T* wp = weight.data_as<const T>();
  const T* bp = bias ? bias->data_as<const T>() : nullptr;
  T* yp = y.data_as<T>();

  ForwardKernel<T> kernel = &forward_loop<kKind, T, 1>;
  int threads = loop_threads(dim, 1);
  long long rows_per_block = 1;
  if (pack_width<T>(dim, {xp, wp, bp, yp}) == V) {
    const ForwardPlan plan = plan_forward(dim, V);
    kernel = with_k<kForwardPacks>(plan.k, [&](auto kc) -> ForwardKernel<T> {
      constexpr int K = decltype(kc)::value;
      return plan.warp ? &forward_regs<kKind, T, V, K, true> : &forward_regs<kKind, T, V, K, false>;
    });
    threads = plan.threads;
    rows_per_block = plan.warp ? plan.threads / 32 : 1;
    if (kernel == nullptr) kernel = &forward_loop<kKind, T, V>;
  }
  kernel<<<grid_for((rows + rows_per_block - 1) / rows_per_block), threads, 0, to_cuda(stream)>>>(
      xp, wp, bp, yp, rows, static_cast<int>(dim), eps);
  IGNIS_CHECK_LAUNCH();
}

// A stream-ordered device allocation, freed in stream order once the kernels using it are queued.
class Workspace {
 public:
  Workspace(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) IGNIS_CUDA_CHECK(cudaMallocAsync(&data_, bytes, stream));
  }
  ~Workspace() {
    if (data_ != nullptr) cudaFreeAsync(data_, stream_);  // a destructor must not throw
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  float* floats() const { return static_cast<float*>(data_); }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

// Blocks that fit on the device at once: more would only add partial rows to sum.
template <class Kernel>
long long resident_blocks(Kernel kernel, int threads, std::size_t smem) {
  int per_sm = 0;
  IGNIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return std::max(1LL, static_cast<long long>(sm_count()) * per_sm);
}

template <class T>
using RegsBackward = void (*)(const T*, const T*, const T*, T*, float*, float*, long long, int, float, int);
template <class T>
using LoopBackward = void (*)(const T*, const T*, const T*, T*, float*, float*, long long, int, float);

template <Kind kKind, class T>
void backward(const char* where, const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
              const Tensor& dweight, const Tensor* dbias, float eps, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = x.size(0), dim = x.size(1);
  check_dim_fits(dim, where);
  const T* xp = x.data_as<const T>();
  const T* wp = weight.data_as<const T>();
  const T* gp = dy.data_as<const T>();
  T* dxp = dx.data_as<T>();
  const cudaStream_t s = to_cuda(stream);
  const long long sums = kKind == Kind::layer ? 2 : 1;

  const bool packed = pack_width<T>(dim, {xp, wp, gp, dxp}) == V;
  RegsBackward<T> regs = nullptr;
  BackwardPlan plan{};
  if (packed) {
    plan = plan_backward(dim, V);
    if (plan.k == 1) regs = &backward_regs<kKind, T, V, 1>;
    if (plan.k == kMaxBackwardPacks) regs = &backward_regs<kKind, T, V, kMaxBackwardPacks>;
  }
  const LoopBackward<T> loop = packed ? &backward_loop<kKind, T, V> : &backward_loop<kKind, T, 1>;
  const int threads = regs != nullptr ? backward_threads(plan.k) : packed ? 1024 : loop_threads(dim, 1);
  // The regs kernel's accumulators: one float per element a thread holds, per sum.
  const std::size_t smem = regs != nullptr ? static_cast<std::size_t>(sums * threads * plan.k * V) * sizeof(float) : 0;
  long long blocks = 0;
  if (regs != nullptr) {
    IGNIS_CUDA_CHECK(cudaFuncSetAttribute(regs, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const long long groups = threads / plan.group;
    blocks = std::min((rows + groups - 1) / groups, resident_blocks(regs, threads, smem));
  } else {
    blocks = std::min(rows, resident_blocks(loop, threads, 0));
  }
  Workspace partial(static_cast<std::size_t>(sums * blocks * dim) * sizeof(float), s);
  float* dw_part = partial.floats();
  float* db_part = kKind == Kind::layer && blocks > 0 ? dw_part + blocks * dim : nullptr;
  if (blocks > 0) {
    if (regs != nullptr)
      regs<<<static_cast<unsigned>(blocks), threads, smem, s>>>(xp, wp, gp, dxp, dw_part, db_part, rows,
                                                                static_cast<int>(dim), eps, plan.group);
    else
      loop<<<static_cast<unsigned>(blocks), threads, 0, s>>>(xp, wp, gp, dxp, dw_part, db_part, rows,
                                                             static_cast<int>(dim), eps);
    IGNIS_CHECK_LAUNCH();
  }
  // With no rows the sums are empty: the kernels below write zeros.
  const dim3 sum_block(32, kSumSlices);
  sum_partials<T><<<ceil_div(dim, 32), sum_block, 0, s>>>(dw_part, static_cast<int>(blocks), static_cast<int>(dim),
                                                          dweight.data_as<T>());
  IGNIS_CHECK_LAUNCH();
  if (dbias != nullptr) {
    sum_partials<T><<<ceil_div(dim, 32), sum_block, 0, s>>>(db_part, static_cast<int>(blocks), static_cast<int>(dim),
                                                            dbias->data_as<T>());
    IGNIS_CHECK_LAUNCH();
  }
}

template <Kind kKind>
void forward_any(const char* where, const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& y,
                 float eps, Stream stream) {
  switch (x.dtype()) {
    case DType::f32: return forward<kKind, float>(where, x, weight, bias, y, eps, stream);
    case DType::f16: return forward<kKind, __half>(where, x, weight, bias, y, eps, stream);
    case DType::bf16: return forward<kKind, __nv_bfloat16>(where, x, weight, bias, y, eps, stream);
    default: fail_expected(where, "x.dtype", "f32, f16 or bf16", x.dtype());
  }
}

template <Kind kKind>
void backward_any(const char* where, const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                  const Tensor& dweight, const Tensor* dbias, float eps, Stream stream) {
  switch (x.dtype()) {
    case DType::f32: return backward<kKind, float>(where, x, weight, dy, dx, dweight, dbias, eps, stream);
    case DType::f16: return backward<kKind, __half>(where, x, weight, dy, dx, dweight, dbias, eps, stream);
    case DType::bf16: return backward<kKind, __nv_bfloat16>(where, x, weight, dy, dx, dweight, dbias, eps, stream);
    default: fail_expected(where, "x.dtype", "f32, f16 or bf16", x.dtype());
  }
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y, float eps, Stream stream) {
  forward_any<Kind::rms>("rmsnorm_forward", x, weight, nullptr, y, eps, stream);
}

void rmsnorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                      const Tensor& dweight, float eps, Stream stream) {
  backward_any<Kind::rms>("rmsnorm_backward", x, weight, dy, dx, dweight, nullptr, eps, stream);
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, float eps,
                       Stream stream) {
  forward_any<Kind::layer>("layernorm_forward", x, weight, &bias, y, eps, stream);
}

void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                        const Tensor& dweight, const Tensor& dbias, float eps, Stream stream) {
  backward_any<Kind::layer>("layernorm_backward", x, weight, dy, dx, dweight, &dbias, eps, stream);
}

}  // namespace ignis::cuda
