// Flash attention forward on tensor cores (mma.sync m16n8k16, fp32 accumulation, sm_80+), its launch, and the
// launch of the Hopper kernel (flash_forward_sm90.cuh: wgmma, TMA) that compute capability 9.0 runs instead.
//
// One thread block of 4 warps per (128 query rows, query head, sequence); warp w owns query rows
// 32w..32w+31 of the block (two m16 fragments, so each K and V fragment read from shared memory feeds
// two MMAs). The block walks the K/V tiles of 64 keys that some of its rows can see; tile n+1 is
// copied to shared memory (cp.async, double buffered) while tile n is computed. Per tile and warp:
// S = Q K^T (32 x 64, fp32 registers), scores scaled into the log2 domain and masked, an online
// softmax update (running max m and partial sum l per row), P rounded to T and O += P V (32 x
// head_dim, fp32 registers). The N x N matrix is never stored.
// Shared rows are padded by 16 bytes (load_padded_rows).
// A grid too small to fill the GPU splits each tile's keys over several blocks (flash_split_plan.h):
// each writes its rows' normalized fp32 o and lse, and flash_combine_kernel merges them.
// See docs/PERF_NOTES.md for the tile sizes and the expected speed.

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <optional>

#include "cuda/common/launch.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/flash_attention.h"
#include "cuda/ops/flash_forward_sm90.cuh"
#include "cuda/ops/flash_kernel_common.cuh"
#include "cuda/ops/flash_launch_common.cuh"
#include "cuda/ops/flash_mma.cuh"
#include "cuda/ops/flash_split_plan.h"

namespace ignis::cuda {
namespace {

using flash::Args;
using flash::cp_async_16;
using flash::KeyRange;
using flash::key_range;
using flash::smem_address;

constexpr int kWarps = 4;
constexpr int kFrags = 2;  // m16 fragments of query rows a warp owns
constexpr int kWarpRows = 16 * kFrags;
constexpr int kBlockM = kWarps * kWarpRows;  // query rows per block
constexpr int kBlockN = 64;                  // keys per K/V tile
constexpr int kThreads = kWarps * 32;
template <int D>
struct Layout {
  static constexpr int kStride = D + 8;  // shared row stride in elements (16 bytes of padding)
  static constexpr int kQTile = kBlockM * kStride;
  static constexpr int kKvTile = kBlockN * kStride;
  // Q, then K buffers 0 and 1, then V buffers 0 and 1.
  static constexpr int kSmemBytes = (kQTile + 4 * kKvTile) * 2;
};

template <class T, int D, int TileRows>
__device__ __forceinline__ void load_tile(T* tile, const T* base, long long row_stride, int row0, int rows) {
  static_assert(Layout<D>::kStride == D + 8, "load_padded_rows writes rows of D + 8 elements");
  flash::load_padded_rows<T, D, TileRows, kThreads>(tile, base, row_stride, row0, rows);
}

// grid: (query tiles * splits, heads_q, batch); see plan_block.
template <class T, int D>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(const Args a) {
  constexpr int kStride = Layout<D>::kStride;
  constexpr int kKvTile = Layout<D>::kKvTile;
  constexpr int kSteps = D / 16;  // k-steps of Q K^T, and dim tile pairs of P V
  // A 64-dim Q fragment set (kSteps x kFrags x 4 registers) fits beside S and O; a 128-dim one would
  // spill, so those are loaded from shared memory at each k-step instead.
  constexpr bool kQInRegisters = D <= 64;
  extern __shared__ __align__(16) unsigned char smem[];
  T* const s_q = reinterpret_cast<T*>(smem);
  T* const s_k = s_q + Layout<D>::kQTile;  // buffer i at s_k + i * kKvTile
  T* const s_v = s_k + 2 * kKvTile;        // buffer i at s_v + i * kKvTile

  flash::BlockWork<T> w;
  if (!flash::plan_block<T, D, kBlockM, kBlockN>(a, w)) return;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_first = w.m0 + kWarpRows * warp;
  const int warp_last = min(warp_first + kWarpRows - 1, a.seqlen_q - 1);
  const bool warp_has_rows = warp_first < a.seqlen_q;
  const KeyRange warp_keys = key_range(a, w.seqlen_k, w.diag, warp_first, warp_last);
  int row_lo[kFrags][2], row_hi[kFrags][2];  // fragment f's rows g and g + 8
#pragma unroll
  for (int f = 0; f < kFrags; ++f) flash::row_key_bounds(a, w, warp_first + 16 * f + g, row_lo[f], row_hi[f]);

  load_tile<T, D, kBlockM>(s_q, w.q, w.q_stride, w.m0, a.seqlen_q);
  load_tile<T, D, kBlockN>(s_k, w.k, w.kv_stride, w.n_first * kBlockN, w.seqlen_k);
  load_tile<T, D, kBlockN>(s_v, w.v, w.kv_stride, w.n_first * kBlockN, w.seqlen_k);
  flash::cp_async_commit();

  // A fragment of fragment f's 16 rows at k-step kk: matrices (rows 0-7, cols 0-7), (rows 8-15, cols 0-7),
  // (rows 0-7, cols 8-15), (rows 8-15, cols 8-15) of the 16-column step = a[0..3].
  auto load_q_fragment = [&](std::uint32_t(&frag)[4], int kk, int f) {
    flash::ldmatrix_x4(
        frag, smem_address(s_q + (kWarpRows * warp + 16 * f + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8));
  };
  std::uint32_t q_frag[kQInRegisters ? kSteps : 1][kFrags][4];
  float acc_o[kFrags][D / 8][4];  // O tiles of each fragment (C layout)
#pragma unroll
  for (int f = 0; f < kFrags; ++f) flash::zero_tiles(acc_o[f]);
  float row_max[kFrags][2], row_sum[kFrags][2];  // max in the log2 domain; sum over this thread's columns only
#pragma unroll
  for (int f = 0; f < kFrags; ++f)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[f][r] = -INFINITY;
      row_sum[f][r] = 0.0f;
    }

  for (int n = w.n_first; n <= w.n_last; ++n) {
    const int buf = (n - w.n_first) & 1;
    if (n < w.n_last) {
      load_tile<T, D, kBlockN>(s_k + (buf ^ 1) * kKvTile, w.k, w.kv_stride, (n + 1) * kBlockN, w.seqlen_k);
      load_tile<T, D, kBlockN>(s_v + (buf ^ 1) * kKvTile, w.v, w.kv_stride, (n + 1) * kBlockN, w.seqlen_k);
    }
    flash::cp_async_commit();  // possibly empty, so that wait<1> below always means "tile n landed"
    flash::cp_async_wait<1>();
    __syncthreads();

    if constexpr (kQInRegisters) {
      if (n == w.n_first) {
#pragma unroll
        for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
          for (int f = 0; f < kFrags; ++f) load_q_fragment(q_frag[kk][f], kk, f);
      }
    }

    const int key0 = n * kBlockN;
    if (warp_has_rows && key0 <= warp_keys.any_hi && key0 + kBlockN - 1 >= warp_keys.any_lo) {
      const T* tile_k = s_k + buf * kKvTile;
      const T* tile_v = s_v + buf * kKvTile;

      // S = Q K^T. B[k][n] = K[key n][dim k]: K rows read without transpose give b[0] (dims
      // 2t, 2t+1 of key g). Matrices per x4: (keys 0-7, dims 0-7) = b0 of key tile 2jp,
      // (keys 0-7, dims 8-15) = b1 of 2jp, (keys 8-15, dims 0-7) = b0 of 2jp+1, (keys 8-15, dims 8-15) = b1.
      // Each K fragment feeds both of the warp's row fragments: half the shared-memory reads per MMA of
      // a 16-row warp.
      float s[kFrags][kBlockN / 8][4];
#pragma unroll
      for (int f = 0; f < kFrags; ++f) flash::zero_tiles(s[f]);
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        std::uint32_t qa[kFrags][4];
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
          if constexpr (kQInRegisters) {
#pragma unroll
            for (int e = 0; e < 4; ++e) qa[f][e] = q_frag[kk][f][e];
          } else {
            load_q_fragment(qa[f], kk, f);
          }
        }
#pragma unroll
        for (int jp = 0; jp < kBlockN / 16; ++jp) {
          std::uint32_t kb[4];
          const int key = jp * 16 + (lane & 7) + (lane >> 4) * 8;
          const int dim = kk * 16 + ((lane >> 3) & 1) * 8;
          flash::ldmatrix_x4(kb, smem_address(tile_k + key * kStride + dim));
#pragma unroll
          for (int f = 0; f < kFrags; ++f) {
            flash::mma_16x8x16<T>(s[f][2 * jp], qa[f], kb[0], kb[1]);
            flash::mma_16x8x16<T>(s[f][2 * jp + 1], qa[f], kb[2], kb[3]);
          }
        }
      }

      const bool need_mask = key0 < warp_keys.all_lo || key0 + kBlockN - 1 > warp_keys.all_hi;
#pragma unroll
      for (int f = 0; f < kFrags; ++f) {
        flash::scale_and_mask(s[f], a, need_mask, row_lo[f], row_hi[f], key0 + 2 * t);
        flash::online_softmax(s[f], acc_o[f], row_max[f], row_sum[f]);
      }

      // O += P V. B[k][n] = V[key k][dim n] needs the transposed load. Matrices per x4:
      // (keys 0-7, dims 0-7) = b0 of dim tile 2dp, (keys 8-15, dims 0-7) = b1 of 2dp,
      // (keys 0-7, dims 8-15) = b0 of 2dp+1, (keys 8-15, dims 8-15) = b1 of 2dp+1.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        std::uint32_t pa[kFrags][4];
#pragma unroll
        for (int f = 0; f < kFrags; ++f) flash::pack_p<T>(s[f], kk, pa[f]);
#pragma unroll
        for (int dp = 0; dp < kSteps; ++dp) {
          std::uint32_t vb[4];
          const int key = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          const int dim = dp * 16 + (lane >> 4) * 8;
          flash::ldmatrix_x4_trans(vb, smem_address(tile_v + key * kStride + dim));
#pragma unroll
          for (int f = 0; f < kFrags; ++f) {
            flash::mma_16x8x16<T>(acc_o[f][2 * dp], pa[f], vb[0], vb[1]);
            flash::mma_16x8x16<T>(acc_o[f][2 * dp + 1], pa[f], vb[2], vb[3]);
          }
        }
      }
    }
    __syncthreads();  // the next iteration's copies overwrite this tile's buffers
  }

#pragma unroll
  for (int f = 0; f < kFrags; ++f)
    flash::store_rows<T>(a, w, warp_first + 16 * f + g, t, acc_o[f], row_max[f], row_sum[f]);
}

constexpr int kCombineWarps = 8;  // warps a combine block

// Rows a combine block merges: a row takes D / 4 lanes (a float4 of its dims each), so a warp merges
// two rows of 64 dims at once, and a block 16 (8 of 128 dims).
template <int D>
constexpr int kCombineRowsPerBlock = kCombineWarps * 32 / (D / 4);

// Merges the splits of each row: o = sum_s w_s o_s / sum_s w_s and lse = m + log(sum_s w_s), with
// w_s = exp(lse_s - m) and m the largest lse_s; a row no split saw gives o = 0, lse = -inf. Lane l of a
// row owns dims [4 l, 4 l + 4). The splits' loads do not wait on each other: o_s is loaded whether or
// not split s saw a key, and a split that saw none (w_s = 0, its o never written) is dropped by a select,
// not a product, so whatever its scratch holds cannot turn the sum into NaN.
// o_part: [splits, rows, D] (rows = batch * seqlen_q * heads_q, o's order); lse_part: [splits, batch,
// heads_q, seqlen_q]; o: [rows, D]; lse: [batch, heads_q, seqlen_q] or null.
template <class T, int D>
__global__ void __launch_bounds__(kCombineWarps * 32)
    flash_combine_kernel(const float* __restrict__ o_part, const float* __restrict__ lse_part, T* __restrict__ o,
                         float* __restrict__ lse, int splits, long long rows, int seqlen_q, int heads_q) {
  constexpr int kLanes = D / 4;
  static_assert(kLanes == 16 || kLanes == 32, "a row takes half a warp or a warp");
  const long long row = static_cast<long long>(blockIdx.x) * kCombineRowsPerBlock<D> + threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes;
  const bool active = row < rows;  // lanes past the last row still join the warp's shuffles
  const long long token = row / heads_q;  // b * seqlen_q + i
  const int h = static_cast<int>(row % heads_q);
  const long long b = token / seqlen_q, i = token % seqlen_q;
  const long long lse_at = (b * heads_q + h) * seqlen_q + i;
  float top = -INFINITY;
  if (active)
    for (int s = lane; s < splits; s += kLanes) top = fmaxf(top, lse_part[s * rows + lse_at]);
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));  // stays within the row's lanes
  if (!active) return;
  float acc[4] = {};
  float total = 0.0f;
  if (top != -INFINITY) {
#pragma unroll 4
    for (int s = 0; s < splits; ++s) {
      const float w = expf(lse_part[s * rows + lse_at] - top);  // 0 for a split that saw no key
      const float4 x = *reinterpret_cast<const float4*>(o_part + (s * rows + row) * D + lane * 4);
      const float v[4] = {x.x, x.y, x.z, x.w};
      total += w;
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[e] += w > 0.0f ? w * v[e] : 0.0f;
    }
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  *reinterpret_cast<uint2*>(o + row * D + lane * 4) =
      make_uint2(flash::pack2<T>(acc[0] * inv, acc[1] * inv), flash::pack2<T>(acc[2] * inv, acc[3] * inv));
  if (lse && lane == 0) lse[lse_at] = total > 0.0f ? top + logf(total) : -INFINITY;
}

// The forward kernel a launch runs and how many of its blocks the device holds at once. Compute capability 9.0
// runs the Hopper kernel (flash_forward_sm90.cuh), unless the environment sets IGNIS_FLASH_KERNEL=mma_sync (the
// tests use it to cover the mma.sync kernel on Hopper); other GPUs run the mma.sync one.
using Sm90Kernel = void (*)(Args, int, int, CUtensorMap, CUtensorMap, CUtensorMap);
struct ForwardKernel {
  bool sm90;                // the Hopper kernel `sm90_kernel`, launched with tensor maps; otherwise `kernel`
  void (*kernel)(Args);     // the mma.sync kernel
  Sm90Kernel sm90_kernel;
  int threads, smem_bytes, block_m, block_n, resident;  // block_m: query rows a block; block_n: keys a tile
};

// Sets a kernel's shared memory limit once a device (so launches need not) and counts its resident blocks.
template <class Kernel>
int resident_blocks(std::array<std::atomic<int>, kCachedDevices>& cache, Kernel kernel, int threads, int smem) {
  return once_per_device(cache, [&] {
    const auto* entry = reinterpret_cast<const void*>(kernel);
    IGNIS_CUDA_CHECK(cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int per_sm = 0;
    IGNIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, entry, threads, smem));
    return std::max(per_sm, 1) * sm_count();
  });
}

template <class T, class Shape>
ForwardKernel sm90_forward_kernel() {
  static std::array<std::atomic<int>, kCachedDevices> cache{};
  const Sm90Kernel kernel = flash::sm90::flash_forward_sm90_kernel<T, Shape>;
  return {true, nullptr, kernel, Shape::kThreads, Shape::kSmemBytes, Shape::kBlockM, Shape::kBlockN,
          resident_blocks(cache, kernel, Shape::kThreads, Shape::kSmemBytes)};
}

template <class T, int D>
ForwardKernel mma_sync_forward_kernel() {
  static std::array<std::atomic<int>, kCachedDevices> cache{};
  return {false, flash_forward_kernel<T, D>, nullptr, kThreads, Layout<D>::kSmemBytes, kBlockM, kBlockN,
          resident_blocks(cache, flash_forward_kernel<T, D>, kThreads, Layout<D>::kSmemBytes)};
}

// The Hopper kernel's unit shapes for head_dim D, in the order plan_schedule prefers among equals, with a key tile's
// time relative to the first's (PERF_NOTES "# Session 35" and "# Session 36"). At D 64, units of 192 rows (three
// consumers) share each K and V tile among more rows, and S is cheap next to the softmax; units of 128 rows (two)
// are more and shorter, which pays where 192-row units leave SMs idle or a causal mask's units are uneven. A
// 128-row tile took 0.767 of a 192-row one's time (H200, B1 S16384 H32 D64 full: 434 against 499 TFLOP/s). At
// D 128, two consumers (O takes 64 registers a thread) with two stages of 128 keys.
using Sm90Rows192 = flash::sm90::ForwardShape<64, 3, 128, 3>;
using Sm90Rows128 = flash::sm90::ForwardShape<64, 2, 128, 3>;
using Sm90D128 = flash::sm90::ForwardShape<128, 2, 128, 2>;
inline constexpr double kRows128TileCost = 0.767;

template <class T, int D>
int forward_candidates(std::array<ForwardKernel, 2>& kernels, std::array<UnitShape, 2>& shapes) {
  static std::array<std::atomic<int>, kCachedDevices> chosen{};  // 1 + (1 for the Hopper kernel): never 0
  if (once_per_device(chosen, [] { return flash::wgmma_kernels_chosen() ? 2 : 1; }) == 1) {
    kernels[0] = mma_sync_forward_kernel<T, D>();
    return 1;
  }
  if constexpr (D == 64) {
    kernels = {sm90_forward_kernel<T, Sm90Rows192>(), sm90_forward_kernel<T, Sm90Rows128>()};
    shapes = {UnitShape{kernels[0].block_m, 1.0, kernels[0].resident},
              UnitShape{kernels[1].block_m, kRows128TileCost, kernels[1].resident}};
    // IGNIS_FLASH_D64_ROWS=192 or 128 leaves that shape the only candidate (the tests cover each shape so).
    static const int forced = [] {
      const char* rows = std::getenv("IGNIS_FLASH_D64_ROWS");
      return rows ? std::atoi(rows) : 0;
    }();
    if (forced == kernels[0].block_m) return 1;
    if (forced == kernels[1].block_m) {  // a lone candidate's relative tile cost does not matter
      kernels[0] = kernels[1];
      shapes[0] = shapes[1];
      return 1;
    }
    return 2;
  } else {
    kernels[0] = sm90_forward_kernel<T, Sm90D128>();
    shapes[0] = UnitShape{kernels[0].block_m, 1.0, kernels[0].resident};
    return 1;
  }
}

// What a launch runs: the kernel and its key splits.
struct ForwardChoice {
  ForwardKernel kernel;
  int splits;
};

// The Hopper kernel's plan for a problem at head_dim D, kept for the last few problems a thread saw: working it out
// takes tens of microseconds on small grids (plan_schedule), and callers repeat shapes (a model's layers).
template <int D>
SchedulePlan cached_plan(const ScheduleProblem& p, const std::array<UnitShape, 2>& shapes, int shape_count,
                         int splits) {
  struct Entry {
    ScheduleProblem problem;
    int splits;
    long long resident;
    SchedulePlan plan;
  };
  thread_local std::array<Entry, 4> entries{};
  thread_local std::size_t next = 0;
  for (const Entry& e : entries)
    if (e.resident == shapes[0].resident && e.splits == splits && e.problem.heads == p.heads &&
        e.problem.seqlen_q == p.seqlen_q && e.problem.seqlen_k == p.seqlen_k && e.problem.causal == p.causal &&
        e.problem.key_tile == p.key_tile)
      return e.plan;
  const SchedulePlan plan = plan_schedule(p, shapes.data(), shape_count, splits);
  entries[next] = {p, splits, shapes[0].resident, plan};
  next = (next + 1) % entries.size();
  return plan;
}

// The kernel and split count for q: [batch, seqlen_q, heads_q, head_dim] against plan_seqlen_k keys (the keys
// the longest sequence sees), with num_splits fixed when nonzero.
template <class T, int D>
ForwardChoice choose_forward(const Tensor& q, long long plan_seqlen_k, bool causal, int num_splits) {
  std::array<ForwardKernel, 2> kernels{};
  std::array<UnitShape, 2> shapes{};
  const int count = forward_candidates<T, D>(kernels, shapes);
  const ForwardKernel& first = kernels[0];
  if (!first.sm90) {
    const long long blocks = static_cast<long long>(ceil_div(q.size(1), first.block_m)) * q.size(2) * q.size(0);
    return {first, num_splits > 0 ? num_splits
                                  : flash_auto_splits(blocks, ceil_div(plan_seqlen_k, first.block_n), first.resident,
                                                      causal)};
  }
  const ScheduleProblem problem{q.size(0) * q.size(2), q.size(1), plan_seqlen_k, causal, first.block_n};
  const SchedulePlan plan = cached_plan<D>(problem, shapes, count, num_splits);
  return {kernels[plan.shape], plan.splits};
}

// q, o: [batch, seqlen_q, heads_q, D]; k, v: [batch, seqlen_k, heads_kv, D]; lse: [batch, heads_q, seqlen_q] or
// undefined; seqlens_k: [batch] or null; plan_seqlen_k: the keys to plan the schedule for (0: seqlen_k).
template <class T, int D>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
            const int* seqlens_k, const AttentionParams& params, int num_splits, long long plan_seqlen_k,
            Stream stream) {
  const auto seqlen_q = q.size(1), seqlen_k = k.size(1);
  Args args{};
  args.q = q.data();
  args.k = k.data();
  args.v = v.data();
  args.o = o.data();
  args.lse = lse.defined() ? static_cast<float*>(lse.data()) : nullptr;
  args.seqlens_k = seqlens_k;
  args.seqlen_q = static_cast<int>(seqlen_q);
  args.seqlen_k = static_cast<int>(seqlen_k);
  args.heads_q = static_cast<int>(q.size(2));
  args.heads_kv = static_cast<int>(k.size(2));
  args.group = args.heads_q / args.heads_kv;
  args.batch = static_cast<int>(q.size(0));
  flash::set_score_args(args, params, seqlen_q, seqlen_k);

  const long long planned_keys = plan_seqlen_k > 0 ? std::min<long long>(plan_seqlen_k, seqlen_k) : seqlen_k;
  const ForwardChoice choice = choose_forward<T, D>(q, planned_keys, params.causal, num_splits);
  const ForwardKernel& forward = choice.kernel;
  const long long tiles = ceil_div(seqlen_q, forward.block_m), heads = q.size(2), batch = q.size(0);
  args.splits = choice.splits;
  const long long units = tiles * args.splits * heads * batch;  // blocks of the grid, or the persistent kernel's units
  // The persistent kernel counts units in int, and its counter runs up to units + its blocks.
  if (forward.sm90 && units > (1LL << 30))
    throw Error("flash_attention_forward: batch * heads_q * query tiles over 2^30 (too many for one launch)");
  // The Hopper kernel runs persistent blocks that take units from a counter (zeroed here) when there are at
  // least four units a resident block; with fewer, the tail of the last units costs more than the overlap across
  // units gains (PERF_NOTES "# Session 35"), and each block takes one unit.
  const bool counted = forward.sm90 && units >= 4LL * forward.resident;
  const long long rows = batch * seqlen_q * heads;
  const bool split = args.splits > 1;
  const std::size_t counter_bytes = counted ? 16 : 0;
  const std::size_t o_bytes = split ? align_up(static_cast<std::size_t>(args.splits * rows * D) * sizeof(float)) : 0;
  const std::size_t lse_bytes = split ? static_cast<std::size_t>(args.splits * rows) * sizeof(float) : 0;
  std::optional<Scratch> scratch;
  if (counted || split) scratch.emplace(counter_bytes + o_bytes + lse_bytes, stream);
  if (counted) {
    args.unit_counter = scratch->at<int>(0);
    IGNIS_CUDA_CHECK(cudaMemsetAsync(args.unit_counter, 0, sizeof(int), to_cuda(stream)));
  }
  if (split) {
    args.o_part = scratch->at<float>(counter_bytes);
    args.lse_part = scratch->at<float>(counter_bytes + o_bytes);
  }
  if (forward.sm90) {
    const auto blocks = static_cast<unsigned>(counted ? forward.resident : units);
    forward.sm90_kernel<<<blocks, forward.threads, forward.smem_bytes, to_cuda(stream)>>>(
        args, static_cast<int>(units), static_cast<int>(tiles * args.splits), flash::tensor_map(q, forward.block_m),
        flash::tensor_map(k, forward.block_n), flash::tensor_map(v, forward.block_n));
  } else {
    const dim3 grid(static_cast<unsigned>(tiles * args.splits), static_cast<unsigned>(heads),
                    static_cast<unsigned>(batch));
    forward.kernel<<<grid, forward.threads, forward.smem_bytes, to_cuda(stream)>>>(args);
  }
  IGNIS_CHECK_LAUNCH();
  if (!split) return;
  flash_combine_kernel<T, D><<<ceil_div(rows, kCombineRowsPerBlock<D>), kCombineWarps * 32, 0, to_cuda(stream)>>>(
      args.o_part, args.lse_part, o.data_as<T>(), args.lse, args.splits, rows, args.seqlen_q, args.heads_q);
  IGNIS_CHECK_LAUNCH();
}

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim]; lse, seqlens_k: as launch's.
template <class T>
void launch_dim(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                const int* seqlens_k, const AttentionParams& params, int num_splits, long long plan_seqlen_k,
                Stream stream) {
  switch (q.size(3)) {
    case 64: return launch<T, 64>(q, k, v, o, lse, seqlens_k, params, num_splits, plan_seqlen_k, stream);
    case 128: return launch<T, 128>(q, k, v, o, lse, seqlens_k, params, num_splits, plan_seqlen_k, stream);
    default: fail_expected("flash_attention_forward", "q.size(3) (head_dim)", "64 or 128", q.size(3));
  }
}

// The split count num_splits = 0 plans for q against seqlen_k keys, for q's head dim (64 or 128, checked by the
// dispatcher). q: [batch, seqlen_q, heads_q, head_dim].
template <class T>
int auto_splits_dim(const Tensor& q, long long seqlen_k, bool causal) {
  return q.size(3) == 64 ? choose_forward<T, 64>(q, seqlen_k, causal, 0).splits
                         : choose_forward<T, 128>(q, seqlen_k, causal, 0).splits;
}

}  // namespace

int flash_attention_auto_splits(const Tensor& q, long long seqlen_k, bool causal) {
  return q.dtype() == DType::bf16 ? auto_splits_dim<__nv_bfloat16>(q, seqlen_k, causal)
                                  : auto_splits_dim<__half>(q, seqlen_k, causal);
}

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const int* seqlens_k, const AttentionParams& params, int num_splits,
                             long long plan_seqlen_k, Stream stream) {
  switch (q.dtype()) {
    case DType::bf16:
      return launch_dim<__nv_bfloat16>(q, k, v, o, lse, seqlens_k, params, num_splits, plan_seqlen_k, stream);
    case DType::f16: return launch_dim<__half>(q, k, v, o, lse, seqlens_k, params, num_splits, plan_seqlen_k, stream);
    default: fail_expected("flash_attention_forward", "q.dtype", "bf16 or f16", q.dtype());
  }
}

}  // namespace ignis::cuda
