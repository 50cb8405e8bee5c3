// Flash attention forward on tensor cores (mma.sync m16n8k16, fp32 accumulation, sm_80+).
//
// One thread block of 4 warps per (128 query rows, query head, sequence); warp w owns query rows
// 32w..32w+31 of the block (two m16 fragments, so each K and V fragment read from shared memory feeds
// two MMAs). The block walks the K/V tiles of 64 keys that some of its rows can see; tile n+1 is
// copied to shared memory (cp.async, double buffered) while tile n is computed. Per tile and warp:
// S = Q K^T (32 x 64, fp32 registers), scores scaled into the log2 domain and masked, an online
// softmax update (running max m and partial sum l per row), P rounded to T and O += P V (32 x
// head_dim, fp32 registers). The N x N matrix is never stored.
// Shared rows are padded by 16 bytes so the 8 row addresses of an ldmatrix hit distinct banks.
// A grid too small to fill the GPU splits each tile's keys over several blocks (flash_split_plan.h):
// each writes its rows' normalized fp32 o and lse, and flash_combine_kernel merges them.
// See docs/PERF_NOTES.md for the tile sizes and the expected speed.
#include <algorithm>
#include <array>
#include <atomic>
#include <climits>

#include "cuda/common/launch.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/flash_attention.h"
#include "cuda/ops/flash_mma.cuh"
#include "cuda/ops/flash_split_plan.h"

namespace ignis::cuda {
namespace {

using flash::cp_async_16;
using flash::exp2_approx;
using flash::smem_address;

constexpr int kWarps = 4;
constexpr int kFrags = 2;  // m16 fragments of query rows a warp owns
constexpr int kWarpRows = 16 * kFrags;
constexpr int kBlockM = kWarps * kWarpRows;  // query rows per block
constexpr int kBlockN = 64;                  // keys per K/V tile
constexpr int kThreads = kWarps * 32;
constexpr double kLog2e = 1.4426950408889634;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
struct Layout {
  static constexpr int kStride = D + 8;  // shared row stride in elements (16 bytes of padding)
  static constexpr int kQTile = kBlockM * kStride;
  static constexpr int kKvTile = kBlockN * kStride;
  // Q, then K buffers 0 and 1, then V buffers 0 and 1.
  static constexpr int kSmemBytes = (kQTile + 4 * kKvTile) * 2;
};

struct Args {
  const void* q;          // [batch, seqlen_q, heads_q, D]
  const void* k;          // [batch, seqlen_k, heads_kv, D]
  const void* v;          // [batch, seqlen_k, heads_kv, D]
  void* o;                // [batch, seqlen_q, heads_q, D]
  float* lse;             // [batch, heads_q, seqlen_q], null for none
  float* o_part;          // [splits, batch, seqlen_q, heads_q, D] when split: each split's normalized o
  float* lse_part;        // [splits, batch, heads_q, seqlen_q] when split: each split's lse, -inf for no key
  int splits;             // chunks of each query tile's key range, one block each; 1: o and lse directly
  const int* seqlens_k;   // [batch]; null: every sequence has seqlen_k keys
  int seqlen_q, seqlen_k;  // seqlen_k: rows of k and v per sequence (the capacity of a cache)
  int heads_q, heads_kv, group;
  float scale_log2;   // scale * log2(e), without softcap
  float cap_inner;    // scale / softcap
  float cap_log2;     // softcap * log2(e); 0 when softcap is off
  bool causal;
  int window_left, window_right;  // -1: unlimited
};

// Keys of rows [first_row, last_row] under the mask: `any_*` bounds the keys some row sees,
// `all_*` the keys every row sees (a tile inside [all_lo, all_hi] needs no mask).
struct KeyRange {
  int any_lo, any_hi, all_lo, all_hi;
};

__device__ __forceinline__ KeyRange key_range(const Args& a, int seqlen_k, int diag, int first_row, int last_row) {
  KeyRange r{0, seqlen_k - 1, 0, seqlen_k - 1};
  if (a.window_left >= 0) {
    r.any_lo = max(0, first_row + diag - a.window_left);
    r.all_lo = last_row + diag - a.window_left;
  }
  if (a.causal) {
    r.any_hi = min(r.any_hi, last_row + diag);
    r.all_hi = min(r.all_hi, first_row + diag);
  }
  if (a.window_right >= 0) {
    r.any_hi = min(r.any_hi, last_row + diag + a.window_right);
    r.all_hi = min(r.all_hi, first_row + diag + a.window_right);
  }
  return r;
}

// tanh(x) = 1 - 2 / (2^(2x log2 e) + 1), with one MUFU exp2 and one reciprocal: tanhf's branches and
// temporaries would not fit beside the kernel's live registers. Its absolute error is about 1e-7, which a
// softcap multiplies into scores with an error of about cap * 1e-7; 2^x = inf gives 1, 2^x = 0 gives -1.
__device__ __forceinline__ float tanh_by_exp2(float x) {
  return 1.0f - 2.0f * __frcp_rn(1.0f + exp2_approx(x * static_cast<float>(2.0 * kLog2e)));
}

// Copies rows [row0, row0 + TileRows) of one head into a shared tile; rows at or past `rows` become zeros
// (so masked keys never bring NaN into P V). base: row 0 of the head; row_stride in elements.
// tile: [TileRows, Layout<D>::kStride] in shared memory; base: [rows, D], rows row_stride elements apart.
template <class T, int D, int TileRows>
__device__ __forceinline__ void load_tile(T* tile, const T* base, long long row_stride, int row0, int rows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < TileRows * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool valid = row0 + r < rows;
    const T* src = valid ? base + static_cast<long long>(row0 + r) * row_stride + col : base;
    cp_async_16(smem_address(tile + r * Layout<D>::kStride + col), src, valid);
  }
}

// Marks the block's rows of one split as having seen no key. lse_part: [seqlen_q], the (split, b, h) row.
__device__ __forceinline__ void mark_no_keys(float* lse_part, int m0, int seqlen_q) {
  if (threadIdx.x < kBlockM && m0 + static_cast<int>(threadIdx.x) < seqlen_q) lse_part[m0 + threadIdx.x] = -INFINITY;
}

// grid: (query tiles * splits, heads_q, batch); block x = tile index from the last * splits + split.
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

  // Blocks with later query rows see more keys under a causal mask: start them first.
  const int tiles = static_cast<int>(gridDim.x) / a.splits;
  const int split = static_cast<int>(blockIdx.x) % a.splits;
  const int m0 = (tiles - 1 - static_cast<int>(blockIdx.x) / a.splits) * kBlockM;
  const int h = blockIdx.y, b = blockIdx.z;
  const int kv_h = h / a.group;
  int seqlen_k = a.seqlen_k;
  if (a.seqlens_k) seqlen_k = min(max(a.seqlens_k[b], 0), a.seqlen_k);
  const int diag = seqlen_k - a.seqlen_q;  // query i's diagonal key is i + diag

  const long long q_stride = static_cast<long long>(a.heads_q) * D;
  const long long kv_stride = static_cast<long long>(a.heads_kv) * D;
  const long long q_head0 = (static_cast<long long>(b) * a.seqlen_q * a.heads_q + h) * D;  // row 0 of (b, h)
  const long long kv_head0 = (static_cast<long long>(b) * a.seqlen_k * a.heads_kv + kv_h) * D;
  const T* q = static_cast<const T*>(a.q) + q_head0;
  const T* k = static_cast<const T*>(a.k) + kv_head0;
  const T* v = static_cast<const T*>(a.v) + kv_head0;
  T* o = static_cast<T*>(a.o) + q_head0;
  float* lse = a.lse ? a.lse + (static_cast<long long>(b) * a.heads_q + h) * a.seqlen_q : nullptr;
  // This split's partial rows (null when the block writes o and lse itself).
  const long long heads_rows = static_cast<long long>(gridDim.z) * a.heads_q * a.seqlen_q;  // rows of o
  float* o_part = a.splits > 1 ? a.o_part + split * heads_rows * D + q_head0 : nullptr;
  float* lse_part =
      a.splits > 1 ? a.lse_part + split * heads_rows + (static_cast<long long>(b) * a.heads_q + h) * a.seqlen_q
                   : nullptr;

  const int block_last = min(m0 + kBlockM - 1, a.seqlen_q - 1);
  const KeyRange block_keys = key_range(a, seqlen_k, diag, m0, block_last);
  if (block_keys.any_lo > block_keys.any_hi && o_part) {  // the combine writes these rows' zeros
    mark_no_keys(lse_part, m0, a.seqlen_q);
    return;
  }
  if (block_keys.any_lo > block_keys.any_hi) {  // no row of the block sees a key (block-uniform)
    for (int e = threadIdx.x; e < kBlockM * D; e += kThreads) {
      const int r = e / D;
      if (m0 + r < a.seqlen_q) o[(m0 + r) * q_stride + e % D] = static_cast<T>(0.0f);
    }
    if (lse && threadIdx.x < kBlockM && m0 + threadIdx.x < a.seqlen_q) lse[m0 + threadIdx.x] = -INFINITY;
    return;
  }
  int n_first = block_keys.any_lo / kBlockN, n_last = block_keys.any_hi / kBlockN;
  if (o_part) {  // this split's contiguous chunk of the key tiles
    const int chunk = (n_last - n_first + a.splits) / a.splits;
    n_first += split * chunk;
    n_last = min(n_last, n_first + chunk - 1);
    if (n_first > n_last) {
      mark_no_keys(lse_part, m0, a.seqlen_q);
      return;
    }
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_first = m0 + kWarpRows * warp;
  const int warp_last = min(warp_first + kWarpRows - 1, a.seqlen_q - 1);
  const bool warp_has_rows = warp_first < a.seqlen_q;
  const KeyRange warp_keys = key_range(a, seqlen_k, diag, warp_first, warp_last);
  // The keys [lo, hi] that this thread's rows see (fragment f's rows g and g + 8): a mask tile compares
  // each column against two numbers instead of working out the mask's rules per score.
  int row_lo[kFrags][2], row_hi[kFrags][2];
#pragma unroll
  for (int f = 0; f < kFrags; ++f)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = warp_first + 16 * f + 8 * r + g;
      const KeyRange keys = key_range(a, seqlen_k, diag, row, row);
      row_lo[f][r] = keys.any_lo;
      row_hi[f][r] = keys.any_hi;
    }

  load_tile<T, D, kBlockM>(s_q, q, q_stride, m0, a.seqlen_q);
  load_tile<T, D, kBlockN>(s_k, k, kv_stride, n_first * kBlockN, seqlen_k);
  load_tile<T, D, kBlockN>(s_v, v, kv_stride, n_first * kBlockN, seqlen_k);
  flash::cp_async_commit();

  // A fragment of fragment f's 16 rows at k-step kk: matrices (rows 0-7, cols 0-7), (rows 8-15, cols 0-7),
  // (rows 0-7, cols 8-15), (rows 8-15, cols 8-15) of the 16-column step = a[0..3].
  auto load_q_fragment = [&](std::uint32_t(&frag)[4], int kk, int f) {
    flash::ldmatrix_x4(
        frag, smem_address(s_q + (kWarpRows * warp + 16 * f + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8));
  };
  std::uint32_t q_frag[kQInRegisters ? kSteps : 1][kFrags][4];
  float acc_o[kFrags][D / 8][4];  // O tiles: dim tile j holds dims 8j + 2t, +1 of the fragment's rows g and g + 8
#pragma unroll
  for (int f = 0; f < kFrags; ++f)
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[f][j][e] = 0.0f;
  float row_max[kFrags][2], row_sum[kFrags][2];  // max in the log2 domain; sum over this thread's columns only
#pragma unroll
  for (int f = 0; f < kFrags; ++f)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[f][r] = -INFINITY;
      row_sum[f][r] = 0.0f;
    }

  for (int n = n_first; n <= n_last; ++n) {
    const int buf = (n - n_first) & 1;
    if (n < n_last) {
      load_tile<T, D, kBlockN>(s_k + (buf ^ 1) * kKvTile, k, kv_stride, (n + 1) * kBlockN, seqlen_k);
      load_tile<T, D, kBlockN>(s_v + (buf ^ 1) * kKvTile, v, kv_stride, (n + 1) * kBlockN, seqlen_k);
    }
    flash::cp_async_commit();  // possibly empty, so that wait<1> below always means "tile n landed"
    flash::cp_async_wait<1>();
    __syncthreads();

    if constexpr (kQInRegisters) {
      if (n == n_first) {
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
      for (int f = 0; f < kFrags; ++f)
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[f][j][e] = 0.0f;
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

      // Scores into the log2 domain, masked to -inf. Element e of fragment f's key tile j: row rows[f][e / 2],
      // key key0 + 8j + 2t + e % 2. The softcap test is uniform, so it is taken once for the whole tile.
      if (a.cap_log2 > 0.0f) {
#pragma unroll
        for (int f = 0; f < kFrags; ++f)
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[f][j][e] = a.cap_log2 * tanh_by_exp2(s[f][j][e] * a.cap_inner);
      } else {
#pragma unroll
        for (int f = 0; f < kFrags; ++f)
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[f][j][e] *= a.scale_log2;
      }
      if (key0 < warp_keys.all_lo || key0 + kBlockN - 1 > warp_keys.all_hi) {
        const int column0 = key0 + 2 * t;  // the key of column 8j + e % 2 is column0 + 8j + e % 2
#pragma unroll
        for (int f = 0; f < kFrags; ++f)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int lo = row_lo[f][r] - column0, hi = row_hi[f][r] - column0;
#pragma unroll
            for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
              for (int c = 0; c < 2; ++c)
                if (8 * j + c < lo || 8 * j + c > hi) s[f][j][2 * r + c] = -INFINITY;
          }
      }

#pragma unroll
      for (int f = 0; f < kFrags; ++f) {
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[f][j][e]);
        float base[2];  // the max that exponents are taken against; 0 while a row has seen no key
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // The 4 lanes of a quad hold the same row.
          tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
          tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
          const float new_max = fmaxf(row_max[f][r], tile_max[r]);
          base[r] = new_max == -INFINITY ? 0.0f : new_max;
          const float rescale = exp2_approx(row_max[f][r] - base[r]);  // 0 while row_max is -inf
          row_max[f][r] = new_max;
          row_sum[f][r] *= rescale;
#pragma unroll
          for (int j = 0; j < D / 8; ++j) {
            acc_o[f][j][2 * r] *= rescale;
            acc_o[f][j][2 * r + 1] *= rescale;
          }
        }
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s[f][j][e] = exp2_approx(s[f][j][e] - base[e / 2]);
            row_sum[f][e / 2] += s[f][j][e];
          }
      }

      // O += P V. P's A fragment for keys 16kk..16kk+15 is C tiles 2kk (a[0], a[1]) and 2kk+1
      // (a[2], a[3]). B[k][n] = V[key k][dim n] needs the transposed load. Matrices per x4:
      // (keys 0-7, dims 0-7) = b0 of dim tile 2dp, (keys 8-15, dims 0-7) = b1 of 2dp,
      // (keys 0-7, dims 8-15) = b0 of 2dp+1, (keys 8-15, dims 8-15) = b1 of 2dp+1.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        std::uint32_t pa[kFrags][4];
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
          pa[f][0] = flash::pack2<T>(s[f][2 * kk][0], s[f][2 * kk][1]);
          pa[f][1] = flash::pack2<T>(s[f][2 * kk][2], s[f][2 * kk][3]);
          pa[f][2] = flash::pack2<T>(s[f][2 * kk + 1][0], s[f][2 * kk + 1][1]);
          pa[f][3] = flash::pack2<T>(s[f][2 * kk + 1][2], s[f][2 * kk + 1][3]);
        }
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
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = row_sum[f][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = warp_first + 16 * f + 8 * r + g;
      if (row >= a.seqlen_q) continue;
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;  // a row without a visible key has sum 0 and o 0
      const float row_lse = sum > 0.0f ? row_max[f][r] * kLn2 + logf(sum) : -INFINITY;
      if (o_part) {  // the combine drops o where lse is -inf, so such rows need not write it
        float* part = o_part + row * q_stride;
        if (sum > 0.0f) {
#pragma unroll
          for (int j = 0; j < D / 8; ++j)
            *reinterpret_cast<float2*>(part + 8 * j + 2 * t) =
                make_float2(acc_o[f][j][2 * r] * inv, acc_o[f][j][2 * r + 1] * inv);
        }
        if (t == 0) lse_part[row] = row_lse;
        continue;
      }
      T* out = o + row * q_stride;
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<std::uint32_t*>(out + 8 * j + 2 * t) =
            flash::pack2<T>(acc_o[f][j][2 * r] * inv, acc_o[f][j][2 * r + 1] * inv);
      if (lse && t == 0) lse[row] = row_lse;
    }
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

// Sets the kernel's shared memory limit once a device; returns the blocks of it the device holds at once.
template <class T, int D>
int resident_blocks() {
  static std::array<std::atomic<int>, kCachedDevices> cache{};
  return once_per_device(cache, [] {
    constexpr int kSmem = Layout<D>::kSmemBytes;
    IGNIS_CUDA_CHECK(
        cudaFuncSetAttribute(flash_forward_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    int per_sm = 0;
    IGNIS_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, flash_forward_kernel<T, D>, kThreads, kSmem));
    return std::max(per_sm, 1) * sm_count();
  });
}

// flash_auto_splits' choice for q: [batch, seqlen_q, heads_q, head_dim] against seqlen_k keys, on a device that
// holds `resident` blocks.
int auto_splits(const Tensor& q, long long seqlen_k, bool causal, int resident) {
  const long long blocks = static_cast<long long>(ceil_div(q.size(1), kBlockM)) * q.size(2) * q.size(0);
  return flash_auto_splits(blocks, ceil_div(seqlen_k, kBlockN), resident, causal);
}

// q, o: [batch, seqlen_q, heads_q, D]; k, v: [batch, seqlen_k, heads_kv, D]; lse: [batch, heads_q, seqlen_q] or
// undefined; seqlens_k: [batch] or null.
template <class T, int D>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
            const int* seqlens_k, const AttentionParams& params, int num_splits, Stream stream) {
  const auto seqlen_q = q.size(1), seqlen_k = k.size(1);
  // A window wider than both sequences is no window; narrower ones fit in int.
  auto window = [&](std::int64_t w) { return w < 0 || w > seqlen_q + seqlen_k ? -1 : static_cast<int>(w); };
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
  args.scale_log2 = static_cast<float>(params.scale * kLog2e);
  args.cap_inner = params.softcap > 0 ? static_cast<float>(params.scale / params.softcap) : 0.0f;
  args.cap_log2 = params.softcap > 0 ? static_cast<float>(params.softcap * kLog2e) : 0.0f;
  args.causal = params.causal;
  args.window_left = window(params.window_left);
  args.window_right = window(params.window_right);

  constexpr int kSmem = Layout<D>::kSmemBytes;
  const long long tiles = ceil_div(seqlen_q, kBlockM), heads = q.size(2), batch = q.size(0);
  const int resident = resident_blocks<T, D>();  // also sets the shared memory limit, so asked on every launch
  args.splits = num_splits > 0 ? num_splits : auto_splits(q, seqlen_k, params.causal, resident);
  const dim3 grid(static_cast<unsigned>(tiles * args.splits), static_cast<unsigned>(heads),
                  static_cast<unsigned>(batch));
  if (args.splits == 1) {
    flash_forward_kernel<T, D><<<grid, kThreads, kSmem, to_cuda(stream)>>>(args);
    IGNIS_CHECK_LAUNCH();
    return;
  }
  const long long rows = batch * seqlen_q * heads;
  const std::size_t o_bytes = align_up(static_cast<std::size_t>(args.splits * rows * D) * sizeof(float));
  const Scratch scratch(o_bytes + static_cast<std::size_t>(args.splits * rows) * sizeof(float), stream);
  args.o_part = scratch.at<float>(0);
  args.lse_part = scratch.at<float>(o_bytes);
  flash_forward_kernel<T, D><<<grid, kThreads, kSmem, to_cuda(stream)>>>(args);
  IGNIS_CHECK_LAUNCH();
  flash_combine_kernel<T, D><<<ceil_div(rows, kCombineRowsPerBlock<D>), kCombineWarps * 32, 0, to_cuda(stream)>>>(
      args.o_part, args.lse_part, o.data_as<T>(), args.lse, args.splits, rows, args.seqlen_q, args.heads_q);
  IGNIS_CHECK_LAUNCH();
}

// resident_blocks of the kernel for q's head dim (64 or 128, checked by the dispatcher).
// q: [batch, seqlen_q, heads_q, head_dim].
template <class T>
int resident_blocks_dim(const Tensor& q) {
  return q.size(3) == 64 ? resident_blocks<T, 64>() : resident_blocks<T, 128>();
}

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim]; lse, seqlens_k: as launch's.
template <class T>
void launch_dim(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                const int* seqlens_k, const AttentionParams& params, int num_splits, Stream stream) {
  switch (q.size(3)) {
    case 64: return launch<T, 64>(q, k, v, o, lse, seqlens_k, params, num_splits, stream);
    case 128: return launch<T, 128>(q, k, v, o, lse, seqlens_k, params, num_splits, stream);
    default: fail_expected("flash_attention_forward", "q.size(3) (head_dim)", "64 or 128", q.size(3));
  }
}

}  // namespace

int flash_attention_auto_splits(const Tensor& q, long long seqlen_k, bool causal) {
  const int resident =
      q.dtype() == DType::bf16 ? resident_blocks_dim<__nv_bfloat16>(q) : resident_blocks_dim<__half>(q);
  return auto_splits(q, seqlen_k, causal, resident);
}

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const int* seqlens_k, const AttentionParams& params, int num_splits, Stream stream) {
  switch (q.dtype()) {
    case DType::bf16: return launch_dim<__nv_bfloat16>(q, k, v, o, lse, seqlens_k, params, num_splits, stream);
    case DType::f16: return launch_dim<__half>(q, k, v, o, lse, seqlens_k, params, num_splits, stream);
    default: fail_expected("flash_attention_forward", "q.dtype", "bf16 or f16", q.dtype());
  }
}

}  // namespace ignis::cuda
