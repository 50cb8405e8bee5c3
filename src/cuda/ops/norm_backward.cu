// RMSNorm and LayerNorm backward over rows.
//
// Backward (backward_staged): a block owns a group of rows (every groups-th row; one or two
// blocks an SM for the whole tensor) and a thread owns the same few packs of every row. Rows
// stream through a ring of shared-memory stages (sm_90: mostly bulk copies by the copy engine;
// else cp.async) filled two rows ahead (RowStages), so loads stay in flight through the reductions
// whatever the registers (which hold only the weight and the sums). Each row recomputes its
// statistics from x (no saved rstd), then
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight (RMSNorm: no mean(g)
// term and mean 0). A row takes one reduction: RMSNorm of sum x^2 and sum g x; LayerNorm of
// sum d, sum d^2, sum g and sum g d with d = x less the mean of the group's previous row
// (mean(g * xhat) being rstd * mean(g (x - mean))), and a second, two-pass one only where the
// shifted sums would cancel.
// dweight = sum over rows of dy * xhat and dbias = sum of dy stay in fp32 registers over the
// group's rows, are written as one partial row per group into a [groups, dim] workspace, and are
// summed over groups in a fixed order: no atomics, deterministic. Rows of up to 4096 columns do that
// sum in the same launch after a grid barrier (cooperative); longer whole-row blocks first add
// their partial rows in clusters of up to 8 through distributed shared memory, and a second kernel
// sums what is left. Rows longer than one block's slice are split over a cluster, whose reductions
// go through distributed shared memory; unaligned or longer rows take a looping kernel.
// RMSNorm is the LayerNorm computation with the mean fixed at 0 and no bias.
#include <algorithm>
#include <climits>
#include <cooperative_groups.h>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/row_cache.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/norm.h"
#include "cuda/ops/norm_backward_plan.h"
#include "cuda/ops/norm_common.cuh"
#include "cuda/ops/norm_partials.cuh"
#include "cuda/ops/norm_row_stages.cuh"

namespace ignis::cuda {
namespace {

using namespace norm;

// Whether backward_staged fills its stages with bulk copies (sm_90) or per-thread cp.async (see
// RowStages and bulk_stage_fills).
template <Kind kKind, class T, int P, int R>
constexpr bool kBulkStages = bulk_stage_fills(kKind == Kind::layer, sizeof(T), P, R);

// One pack of the looping backward at column c: turns x into xhat and dy into g = dy * weight,
// adds dy * xhat and dy to the thread's partial sums, and returns (sum g, sum g * xhat).
// weight: [dim].
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
// out: [dim], one row of dx.
template <Kind kKind, class T, int V>
__device__ __forceinline__ void write_dx(const float (&xh)[V], const float (&gv)[V], RowStats s, float2 means, T* out,
                                         int c) {
  float d[V];
  const float mean_g = kKind == Kind::layer ? means.x : 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) d[j] = s.rstd * (gv[j] - mean_g - xh[j] * means.y);
  store_floats<T, V>(out + c, d);
}

// The float2 and float4 sums as a reduce-scatter: the first butterfly steps halve the components a
// lane carries (lane group c = lane / (32 / components) ends with component c), so a warp's float4
// takes 6 shuffles instead of 20; the warps' sums of component c (at most 16 warps) are then added
// by lane group c and broadcast from its first lane. Every addition is commutative between the two
// lanes that make it, so a group's lanes hold the same bits, and every thread gets them.
// scratch: 64 floats (as 16 float4) that no thread reads after the caller's previous barrier.
__device__ __forceinline__ float2 scatter_halves(float2 v, int offset) {
  const bool upper = threadIdx.x & offset;
  return {upper ? v.y : v.x, upper ? v.x : v.y};  // (kept, given)
}

// The second half of the reduce-scatter: `part` (one component, carried by each group of kLanes
// lanes) summed over the group's lanes, then over the block's warps; the sum in every lane of the
// group. sums: [32 / kLanes][16] floats of scratch.
template <int kLanes>
__device__ __forceinline__ float group_block_sum(float part, float* sums) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = static_cast<int>(blockDim.x / 32);
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) part = xor_step(part, offset);
  float* group = sums + (lane / kLanes) * 16;
  if (lane % kLanes == 0) group[warp] = part;
  __syncthreads();
  const int w = lane % kLanes;
  part = w < warps ? group[w] : 0.0f;
#pragma unroll
  for (int k = w + kLanes; k < 16; k += kLanes) part += k < warps ? group[k] : 0.0f;
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) part = xor_step(part, offset);
  return part;
}

__device__ float2 staged_sum(float2 v, float2* scratch, float2* slot, int cluster) {
  const float2 split = scatter_halves(v, 16);
  const float part = group_block_sum<16>(split.x + __shfl_xor_sync(kFullMask, split.y, 16),
                                         reinterpret_cast<float*>(scratch));
  v = {__shfl_sync(kFullMask, part, 0), __shfl_sync(kFullMask, part, 16)};
  if (cluster > 1) v = cluster_reduce(v, Add{}, slot);
  return v;
}

__device__ float4 staged_sum(float4 v, float4* scratch, float4* slot, int cluster) {
  const bool upper = threadIdx.x & 16;
  const float2 kept = upper ? make_float2(v.z, v.w) : make_float2(v.x, v.y);
  const float2 given = upper ? make_float2(v.x, v.y) : make_float2(v.z, v.w);
  const float2 pair = {kept.x + __shfl_xor_sync(kFullMask, given.x, 16),
                       kept.y + __shfl_xor_sync(kFullMask, given.y, 16)};
  const float2 split = scatter_halves(pair, 8);
  const float part = group_block_sum<8>(split.x + __shfl_xor_sync(kFullMask, split.y, 8),
                                        reinterpret_cast<float*>(scratch));
  v = {__shfl_sync(kFullMask, part, 0), __shfl_sync(kFullMask, part, 8), __shfl_sync(kFullMask, part, 16),
       __shfl_sync(kFullMask, part, 24)};
  if (cluster > 1) v = cluster_reduce(v, Add{}, slot);
  return v;
}

// Two rows' float4 sums at once (backward_staged's steps of two rows; whole-row blocks only): the
// same reduce-scatter over eight components, so a lane group of 4 lanes ends with one component.
// scratch: 128 floats that no thread reads after the caller's previous barrier.
__device__ void staged_sum(float4& a, float4& b, float* scratch) {
  float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int half = 4, offset = 16; half >= 1; half /= 2, offset /= 2) {
    const bool upper = threadIdx.x & offset;
#pragma unroll
    for (int j = 0; j < half; ++j) {
      const float kept = upper ? v[half + j] : v[j];
      const float given = upper ? v[j] : v[half + j];
      v[j] = kept + __shfl_xor_sync(kFullMask, given, offset);
    }
  }
  const float part = group_block_sum<4>(v[0], scratch);
#pragma unroll
  for (int c = 0; c < 8; ++c) v[c] = __shfl_sync(kFullMask, part, 4 * c);
  a = {v[0], v[1], v[2], v[3]};
  b = {v[4], v[5], v[6], v[7]};
}

// The cooperative finish of backward_staged: the grid's blocks sum the [groups, dim] partial rows
// into dweight (and dbias), C columns at a time. tile: shared memory for sum_columns.
// dw_part, db_part: [groups, dim]; dweight, dbias: [dim] (db_part, dbias null for RMSNorm).
template <Kind kKind, class T, int C>
__device__ void finish_sums(const float* __restrict__ dw_part, const float* __restrict__ db_part, long long groups,
                            int dim, T* __restrict__ dweight, T* __restrict__ dbias, unsigned char* tile) {
  const int chunks = (dim + C - 1) / C;
  const int items = (kKind == Kind::layer ? 2 : 1) * chunks;
  for (int item = static_cast<int>(blockIdx.x); item < items; item += static_cast<int>(gridDim.x)) {
    const bool bias = item >= chunks;
    sum_columns<T, 4, C>(bias ? db_part : dw_part, groups, dim, (item % chunks) * C, bias ? dbias : dweight,
                         reinterpret_cast<float*>(tile));
  }
}

// The backward of rows cached in shared memory. A group of rows (rows g, g + groups, ...)
// belongs to one block, or to a cluster of `cluster` blocks each holding a slice of the columns.
// Thread t of a block owns packs t, t + blockDim.x, ... (P of them) of the block's slice in every
// row; the rows stream through RowStages (kStages - 1 rows ahead, so DRAM stays busy through the
// reductions and barriers), R rows a step (R = 2: whole-row blocks only, the two rows' statistics
// in one reduction), and the thread keeps its columns' dweight/dbias sums in registers over the
// group's rows. At the end each block writes its slice of the group's partial row to
// dw_part / db_part ([groups, dim] fp32); with merge > 1 (whole-row blocks launched in clusters of
// merge) the cluster's blocks add their rows first (merge_partials) and the parts are
// [groups / merge, dim]. With `finish` > 0 (merge 1, a cooperative launch of whole-row blocks, all
// resident) the grid then waits for every partial row and its blocks sum them, in chunks of `finish`
// columns (16, 32 or 64), into dweight / dbias ([dim]); otherwise sum_partials does that in a second
// launch. The ring of stages starts ring_line_offset bytes past a 128-byte line.
// x, dy, dx: [rows, dim]; weight: [dim].
template <Kind kKind, class T, int P, int R = 1>
__global__ void __launch_bounds__(kStagedThreads)
    backward_staged(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                    T* __restrict__ dx, float* __restrict__ dw_part, float* __restrict__ db_part,
                    T* __restrict__ dweight, T* __restrict__ dbias, long long rows, int dim, float eps, int cluster,
                    int merge, int finish) {
  static_assert(R == 1 || R == 2, "one or two rows a step");
  constexpr int V = 16 / sizeof(T);
  constexpr int S = kStages + R - 1;  // stages: kStages - 1 rows in flight beside the step's R
  using PackT = Pack<T, V>;
  extern __shared__ __align__(16) unsigned char staged_smem[];  // [S][x, dy][slice] packs
  // The step's reductions alternate buffers between steps: float2 for RMSNorm (and LayerNorm's
  // two-pass fallback), float4 for LayerNorm (and two rows of RMSNorm), 8 floats for two rows of
  // LayerNorm.
  __shared__ float2 scratch2[2][16];
  __shared__ float4 scratch4[2][16];
  __shared__ float scratch8[R == 2 && kKind == Kind::layer ? 2 : 1][128];
  __shared__ float2 slot2;
  __shared__ float4 slot4;

  pdl_trigger();  // sum_partials may launch now: it waits for this whole grid before it reads
  const int packs = dim / V;
  const int slice = (packs + cluster - 1) / cluster;
  const int first = static_cast<int>(blockIdx.x % cluster) * slice;
  const int count = min(packs, first + slice) - first;  // this block's packs
  const long long group = blockIdx.x / cluster;
  // Group g takes rows g, g + groups, g + 2 groups, ...: the rows in flight at any time are
  // neighbours in memory, as a copy kernel's are.
  const long long groups = gridDim.x / cluster;
  const long long n = group < rows ? (rows - group + groups - 1) / groups : 0;
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  __shared__ unsigned long long landed[S];
  const long long start = group * packs + first;
  using Stages = RowStages<PackT, S, P, kBulkStages<kKind, T, P, R>, R>;
  // The ring's place past a 128-byte line, whatever static shared memory comes before it.
  constexpr int kRingOffset = ring_line_offset(kKind == Kind::layer, P, R);
  unsigned char* ring = staged_smem + (kRingLine - shared_address(staged_smem) % kRingLine) % kRingLine + kRingOffset;
  Stages stages{reinterpret_cast<PackT*>(ring),
                reinterpret_cast<const PackT*>(x) + start,
                reinterpret_cast<const PackT*>(dy) + start,
                landed,
                packs * groups,
                n,
                slice,
                count};
  stages.start();

  // This thread's weight: as floats when they fit beside the sums (16 columns or fewer, two
  // conversions an element fewer for 16-bit types), else raw packs, converted at each use.
  constexpr bool kFloatWeight = P * V <= 16;
  PackT w[P];
  float wf[P][V];
  float dw[P][V] = {}, db[P][V] = {};
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int k = tid + p * threads;
    if (k >= count) continue;
    w[p] = reinterpret_cast<const PackT*>(weight)[first + k];
    if constexpr (kFloatWeight) to_floats(w[p], wf[p]);
  }
  const auto weight_at = [&](int p, int j) {
    if constexpr (kFloatWeight) return wf[p][j];
    else return to_float(w[p].v[j]);
  };
  const float inv_dim = 1.0f / static_cast<float>(dim);
  // LayerNorm sums d = x - shift, shift being the mean of the first row of the group's previous
  // step (0 before the first), so one reduction gives the mean, the variance E[d^2] - E[d]^2 and
  // sum g (x - mean): a common offset cancels exactly in d. Where E[d]^2 > the variance (a row far
  // from the previous one) that loses more than one bit, and the step takes a second, two-pass
  // reduction; the branch is the same in every thread of the block and cluster (the sums have the
  // same bits everywhere). Rows of 32 columns a thread took a reduction of the mean first until
  // session 9: one reduction is 2-3 points of copy faster for LayerNorm bf16 8192 and 16384
  // (H100, PERF_NOTES session 9).
  float shift = 0.0f;

  int buffer = 0;  // the scratch buffer of this step's reductions (they alternate between steps)
  for (long long i = 0; i < n; i += R, buffer ^= 1) {
    const PackT* xs[R];
    stages.wait_rows(i, xs);
    // Rows of the step past the group's end: only the last step of an odd count has one.
    const auto live = [&](int r) { return r == 0 || i + r < n; };

    // Calls f(x, g) for each column of this thread in row r of the step, g = dy * weight.
    const auto each_column = [&](int r, auto&& f) {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int k = tid + p * threads;
        if (k >= count) continue;
        float xv[V], gv[V];
        to_floats(xs[r][k], xv);
        to_floats(xs[r][slice + k], gv);
#pragma unroll
        for (int j = 0; j < V; ++j) f(xv[j], gv[j] * weight_at(p, j));
      }
    };
    // (sum d, sum d^2, sum g, sum g d) a row; RMSNorm: d = x.
    float4 sums[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      sums[r] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (!live(r)) continue;
      each_column(r, [&](float xv, float g) {
        const float d = xv - shift;
        sums[r].x += d;
        sums[r].y += d * d;
        sums[r].z += g;
        sums[r].w += g * d;
      });
    }
    float mean[R] = {}, var[R], mean_g[R] = {}, sum_gc[R];  // sum_gc: sum g (x - mean)
    if constexpr (kKind == Kind::layer) {
      if constexpr (R == 1) sums[0] = staged_sum(sums[0], scratch4[buffer], &slot4, cluster);
      else staged_sum(sums[0], sums[1], scratch8[buffer]);
      stages.after_first_barrier(i);
      bool cancels = false;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float mean_d = sums[r].x * inv_dim;
        mean[r] = shift + mean_d;
        var[r] = sums[r].y * inv_dim - mean_d * mean_d;
        mean_g[r] = sums[r].z * inv_dim;
        sum_gc[r] = sums[r].w - mean_d * sums[r].z;
        cancels |= !(mean_d * mean_d <= var[r]);
      }
      if (cancels) {
        float2 c[R];  // (sum (x - mean)^2, sum g (x - mean)) a row
#pragma unroll
        for (int r = 0; r < R; ++r) {
          c[r] = {0.0f, 0.0f};
          if (!live(r)) continue;
          each_column(r, [&](float xv, float g) {
            const float d = xv - mean[r];
            c[r].x += d * d;
            c[r].y += g * d;
          });
        }
        if constexpr (R == 1) {
          c[0] = staged_sum(c[0], scratch2[buffer], &slot2, cluster);
        } else {
          const float4 both =
              staged_sum(make_float4(c[0].x, c[0].y, c[1].x, c[1].y), scratch4[buffer], &slot4, 1);
          c[0] = {both.x, both.y};
          c[1] = {both.z, both.w};
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          var[r] = c[r].x * inv_dim;
          sum_gc[r] = c[r].y;
        }
      }
      shift = mean[0];
    } else {
      if constexpr (R == 1) {
        const float2 s2 = staged_sum(make_float2(sums[0].y, sums[0].w), scratch2[buffer], &slot2, cluster);
        var[0] = s2.x * inv_dim;
        sum_gc[0] = s2.y;
      } else {
        const float4 s4 =
            staged_sum(make_float4(sums[0].y, sums[0].w, sums[1].y, sums[1].w), scratch4[buffer], &slot4, 1);
        var[0] = s4.x * inv_dim;
        sum_gc[0] = s4.y;
        var[1] = s4.z * inv_dim;
        sum_gc[1] = s4.w;
      }
      stages.after_first_barrier(i);
    }

#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (!live(r)) continue;
      const float rstd = rsqrtf(var[r] + eps);
      const float mean_gx = rstd * sum_gc[r] * inv_dim;  // mean(g * xhat)
      PackT* out = reinterpret_cast<PackT*>(dx) + (group + (i + r) * groups) * packs + first;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int k = tid + p * threads;
        if (k >= count) continue;
        float xv[V], gv[V], d[V];
        to_floats(xs[r][k], xv);
        to_floats(xs[r][slice + k], gv);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float xhat = (xv[j] - mean[r]) * rstd;
          const float gy = gv[j];
          d[j] = rstd * (gy * weight_at(p, j) - mean_g[r] - xhat * mean_gx);
          dw[p][j] += gy * xhat;
          if constexpr (kKind == Kind::layer) db[p][j] += gy;
        }
        store_pack<T, V>(out + k, d);
      }
    }
  }

  if (merge > 1) {
    merge_partials<kKind, P, V>(dw, db, staged_smem, dw_part, db_part, dim, merge);
    return;
  }
  float* pw = dw_part + group * dim;
  float* pb = kKind == Kind::layer ? db_part + group * dim : nullptr;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int k = tid + p * threads;
    if (k >= count) continue;
    const int c = (first + k) * V;
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      reinterpret_cast<float4*>(pw + c)[q] =
          make_float4(dw[p][4 * q], dw[p][4 * q + 1], dw[p][4 * q + 2], dw[p][4 * q + 3]);
      if constexpr (kKind == Kind::layer)
        reinterpret_cast<float4*>(pb + c)[q] =
            make_float4(db[p][4 * q], db[p][4 * q + 1], db[p][4 * q + 2], db[p][4 * q + 3]);
    }
  }
  if (!finish) return;
  cooperative_groups::this_grid().sync();  // every group's partial row written and visible
  // The stages are free (every copy landed before the last row was read): they hold the tile.
  // finish is the chunk width (finish_chunk_columns).
  if (finish == 16)
    finish_sums<kKind, T, 16>(dw_part, db_part, groups, dim, dweight, dbias, staged_smem);
  else if (finish == 64)
    finish_sums<kKind, T, 64>(dw_part, db_part, groups, dim, dweight, dbias, staged_smem);
  else
    finish_sums<kKind, T, kSumColumns>(dw_part, db_part, groups, dim, dweight, dbias, staged_smem);
}

// Rows too long for registers: three passes per row (statistics, sums, dx). The block's
// partial row lives in the workspace; each column is read and written only by its owning thread.
// x, dy, dx: [rows, dim]; weight: [dim]; dw_part, db_part: [gridDim.x, dim] (db_part null for RMSNorm).
template <Kind kKind, class T, int V>
__global__ void __launch_bounds__(1024)
    backward_loop(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                  T* __restrict__ dx, float* __restrict__ dw_part, float* __restrict__ db_part, long long rows,
                  int dim, float eps) {
  // One buffer each: a row's two reductions alternate between them (see sum_over_warps).
  __shared__ Partial<kKind> scratch[32];
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
      sums = Add{}(sums, backward_pack<kKind, T, V>(xv, gv, s, weight, c, dw, db));
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

// Blocks that fit on the device at once: more would only add partial rows to sum.
template <class Kernel>
long long resident_blocks(Kernel kernel, int threads, std::size_t smem) {
  int per_sm = 0;
  IGNIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return static_cast<long long>(sm_count()) * per_sm;
}

// Groups (blocks or clusters) of `kernel` that run at once; clusters are placed within a GPC, so
// with one block an SM fewer than SMs / cluster may fit. 0 when none can run.
template <class Kernel>
long long resident_groups(Kernel kernel, const StagedPlan& plan, cudaStream_t s) {
  if (plan.cluster == 1) return resident_blocks(kernel, plan.threads, plan.smem);
  cudaFuncAttributes built{};
  IGNIS_CUDA_CHECK(cudaFuncGetAttributes(&built, kernel));
  if (built.ptxVersion < 90) return 0;  // JIT-built from the compute_80 PTX: no clusters
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config =
      rows_launch_config(RowPlan{plan.cluster, plan.threads, plan.smem}, 1, s, &attribute);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: the caller falls back to the looping kernel
    return 0;
  }
  return clusters;
}

template <class T>
using BackwardKernel = void (*)(const T*, const T*, const T*, T*, float*, float*, T*, T*, long long, int, float, int,
                                int, int);
template <class T>
using LoopBackward = void (*)(const T*, const T*, const T*, T*, float*, float*, long long, int, float);

// Runs backward_staged when the row fits it; false (nothing queued) when it does not or a
// cluster launch is refused.
// xp (x), gp (dy), dxp (dx): [rows, dim]; wp (weight), dweight, dbias: [dim] (dbias null for RMSNorm).
template <Kind kKind, class T>
bool backward_staged_launch(const T* xp, const T* wp, const T* gp, T* dxp, T* dweight, T* dbias, long long rows,
                            long long dim, float eps, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const bool fast_memory = fast_memory_card();
  StagedPlan plan = plan_staged(dim, V, fast_memory);
  const int smem_room = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  // 192 KB of stages fit sm_90 (227 KB a block) but not every device that runs the compute_80 PTX.
  if (plan.cluster == 0 || plan.smem + 1024 > smem_room) return false;
  // Rows a step and groups an SM (fewer groups where fewer fit) by norm, dtype, row length and card.
  const StagedSchedule schedule =
      schedule_staged(plan, kKind == Kind::layer, static_cast<int>(sizeof(T)), dim, fast_memory, smem_room);
  const bool two_rows = schedule.rows_a_step == 2;
  BackwardKernel<T> kernel = nullptr;
  switch (plan.packs) {
    case 1: kernel = &backward_staged<kKind, T, 1>; break;
    case 2:
      kernel = &backward_staged<kKind, T, 2>;
      if constexpr (sizeof(T) == 2) kernel = two_rows ? &backward_staged<kKind, T, 2, 2> : kernel;
      break;
    case 4: kernel = two_rows ? &backward_staged<kKind, T, 4, 2> : &backward_staged<kKind, T, 4>; break;
    default: return false;
  }
  plan.smem = schedule.smem;
  if (schedule.groups_per_sm == 1 && plan.cluster == 1) {
    cudaFuncAttributes built{};
    IGNIS_CUDA_CHECK(cudaFuncGetAttributes(&built, kernel));
    plan.smem = static_cast<int>(
        one_block_an_sm(plan.smem, device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor),
                        device_attribute(cudaDevAttrReservedSharedMemoryPerBlock), built.sharedSizeBytes));
  }
  IGNIS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, plan.smem));
  IGNIS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  const long long resident = resident_groups(kernel, plan, s);
  if (resident <= 0) return false;
  const long long wanted = std::max(1LL, static_cast<long long>(schedule.groups_per_sm) * sm_count() / plan.cluster);
  long long groups = std::min({rows, resident, wanted});
  const long long sums = kKind == Kind::layer ? 2 : 1;
  const Stream stream{static_cast<void*>(s)};
  // Rows of up to kFinishColumns, whole-row blocks, all resident: one cooperative launch that also
  // sums the partial rows (sum_partials as a second launch cost ~4 us a call, H100 PERF_NOTES
  // session 5).
  const int finish_columns = finish_chunk_columns(static_cast<int>(sums), dim, groups);
  if (plan.cluster == 1 && dim <= kFinishColumns && sum_tile_bytes(plan.threads, finish_columns) <= plan.smem &&
      device_attribute(cudaDevAttrCooperativeLaunch) != 0) {
    const Scratch partial(static_cast<std::size_t>(sums * groups * dim) * sizeof(float), stream);
    float* dw_part = partial.at<float>(0);
    float* db_part = kKind == Kind::layer ? dw_part + groups * dim : nullptr;
    cudaLaunchAttribute cooperative;
    cudaLaunchConfig_t config = rows_launch_config(RowPlan{1, plan.threads, plan.smem}, groups, s, &cooperative);
    cooperative = cudaLaunchAttribute{};  // one block a group: no cluster shape, the cooperative flag instead
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    config.numAttrs = 1;
    if (cudaLaunchKernelEx(&config, kernel, xp, wp, gp, dxp, dw_part, db_part, dweight, dbias, rows,
                           static_cast<int>(dim), eps, 1, 1, finish_columns) == cudaSuccess)
      return true;
    (void)cudaGetLastError();  // refused (too many blocks for a cooperative grid, MPS limits): two launches
  }
  // Whole-row blocks add their partial rows in clusters of `merge` (see merge_partials) when
  // clusters that size keep all the groups resident; groups past `rows` have no rows.
  int merge = plan.cluster == 1 ? kMaxStagedCluster : 1;
  for (; merge > 1; merge /= 2) {
    const StagedPlan merged{merge, plan.threads, plan.packs, plan.smem};
    if (groups >= 2 * merge && resident_groups(kernel, merged, s) * merge >= ceil_div(groups, merge) * merge) break;
  }
  groups = ceil_div(groups, merge) * merge;
  const long long parts = groups / merge;
  const Scratch partial(static_cast<std::size_t>(sums * parts * dim) * sizeof(float), stream);
  float* dw_part = partial.at<float>(0);
  float* db_part = kKind == Kind::layer ? dw_part + parts * dim : nullptr;
  const RowPlan launch{plan.cluster * merge, plan.threads, plan.smem};  // one of the two is 1
  if (!launch_rows(kernel, launch, groups / merge, stream, xp, wp, gp, dxp, dw_part, db_part, dweight, dbias, rows,
                   static_cast<int>(dim), eps, plan.cluster, merge, 0))
    return false;
  IGNIS_CHECK_LAUNCH();
  sum_partials_into(dw_part, db_part, parts, dim, dweight, dbias, s);
  return true;
}

// x, dy, dx: [rows, dim]; weight, dweight, *dbias: [dim] (dbias null for RMSNorm).
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
  T* dwp = dweight.data_as<T>();
  T* dbp = dbias != nullptr ? dbias->data_as<T>() : nullptr;
  const cudaStream_t s = to_cuda(stream);

  const bool packed = pack_width<T>(dim, {xp, wp, gp, dxp}) == V;
  if (packed && rows > 0 && backward_staged_launch<kKind, T>(xp, wp, gp, dxp, dwp, dbp, rows, dim, eps, s)) return;

  // Unaligned rows, rows past kMaxStagedCluster blocks' slices, refused clusters, and no rows.
  const LoopBackward<T> loop = packed ? &backward_loop<kKind, T, V> : &backward_loop<kKind, T, 1>;
  const int threads = packed ? 1024 : loop_threads(dim, 1);
  const long long blocks = std::min(rows, std::max(1LL, resident_blocks(loop, threads, 0)));
  const long long sums = kKind == Kind::layer ? 2 : 1;
  const Scratch partial(static_cast<std::size_t>(sums * blocks * dim) * sizeof(float), stream);
  float* dw_part = partial.at<float>(0);
  float* db_part = kKind == Kind::layer && blocks > 0 ? dw_part + blocks * dim : nullptr;
  if (blocks > 0) {
    loop<<<static_cast<unsigned>(blocks), threads, 0, s>>>(xp, wp, gp, dxp, dw_part, db_part, rows,
                                                           static_cast<int>(dim), eps);
    IGNIS_CHECK_LAUNCH();
  }
  // With no rows the sums are empty: zeros.
  sum_partials_into(dw_part, db_part, blocks, dim, dwp, dbp, s);
}

// x, dy, dx: [rows, dim]; weight, dweight, *dbias: [dim] (dbias null for RMSNorm).
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

void rmsnorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                      const Tensor& dweight, float eps, Stream stream) {
  backward_any<Kind::rms>("rmsnorm_backward", x, weight, dy, dx, dweight, nullptr, eps, stream);
}

void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                        const Tensor& dweight, const Tensor& dbias, float eps, Stream stream) {
  backward_any<Kind::layer>("layernorm_backward", x, weight, dy, dx, dweight, &dbias, eps, stream);
}

}  // namespace ignis::cuda
