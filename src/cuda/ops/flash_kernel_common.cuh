#pragma once
// What both flash attention forward kernels share (flash_attention.cu: mma.sync on any sm_80+ GPU;
// flash_forward_sm90.cuh: wgmma on Hopper): the launch arguments, the mask's key ranges, where a block's
// rows and keys lie (its query tile, its split's chunk of key tiles, its early exits), the online softmax
// of one 16-row fragment over a key tile, and the rows' final store.
//
// A 16-row fragment is the C layout of mma.sync m16n8 (and of each warp's quarter of a wgmma m64
// accumulator): lane l holds rows g = l / 4 and g + 8, columns 8j + 2t, +1 (t = l % 4) of column tile j,
// as elements [j][0..1] and [j][2..3].
#include <cuda_runtime.h>

#include "cuda/ops/flash_mma.cuh"

namespace ignis::cuda::flash {

inline constexpr double kLog2e = 1.4426950408889634;
inline constexpr float kLn2 = 0.6931471805599453f;

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
  int batch;          // sequences
  int* unit_counter;  // the persistent Hopper kernel's shared work counter (zeroed before it), or null
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

// Zeros a fragment's accumulator tiles. acc: [Tiles][4].
template <int Tiles>
__device__ __forceinline__ void zero_tiles(float (&acc)[Tiles][4]) {
#pragma unroll
  for (int j = 0; j < Tiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
}

// Copies rows [row0, row0 + TileRows) of one head into a shared tile whose rows are padded by 16 bytes (so the 8
// row addresses of an ldmatrix hit distinct banks); rows at or past `rows` become zeros, so that masked keys and
// queries bring no NaN into the products. tile: [TileRows, D + 8] in shared memory; base: [rows, D], rows
// row_stride elements apart. Called by all Threads threads of the block.
template <class T, int D, int TileRows, int Threads>
__device__ __forceinline__ void load_padded_rows(T* tile, const T* base, long long row_stride, int row0, int rows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < TileRows * kChunks; c += Threads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool valid = row0 + r < rows;
    const T* src = valid ? base + static_cast<long long>(row0 + r) * row_stride + col : base;
    cp_async_16(smem_address(tile + r * (D + 8) + col), src, valid);
  }
}

// Where one block's work lies: its query tile, its (b, h) pointers, and the key tiles it walks.
template <class T>
struct BlockWork {
  int m0;          // the tile's first query row
  int seqlen_k;    // this sequence's keys
  int diag;        // query i's diagonal key is i + diag
  int n_first, n_last;  // key tiles walked, inclusive
  long long q_stride, kv_stride;  // elements between rows of q / o and of k / v
  const T* q;      // row 0 of (b, h): [seqlen_q, q_stride]
  const T* k;      // row 0 of (b, kv head): [seqlen_k, kv_stride]
  const T* v;
  T* o;            // row 0 of (b, h) in o
  float* lse;      // [seqlen_q] of (b, h), or null
  float* o_part;   // this split's rows of (b, h), or null when the block writes o and lse itself
  float* lse_part; // [seqlen_q] of (split, b, h), or null
};

// One unit of work: query tile x / splits counted from the last (under a causal mask later rows see more keys:
// they start first), split x % splits, query head h, sequence b, of tiles_x = query tiles * splits and batch
// sequences. A non-persistent kernel's block is the unit its grid coordinates name.
struct WorkCoords {
  int x, h, b, tiles_x, batch;
};

__device__ __forceinline__ WorkCoords grid_coords() {
  return {static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z),
          static_cast<int>(gridDim.x), static_cast<int>(gridDim.z)};
}

// Where unit c's work lies. Returns false when it has nothing to compute: no row of its tile sees a key, or its
// split's chunk is empty; write_no_keys then writes what its rows need. Uniform over the unit's threads.
template <class T, int D, int BlockM, int BlockN>
__device__ __forceinline__ bool plan_work(const Args& a, const WorkCoords& c, BlockWork<T>& w) {
  const int tiles = c.tiles_x / a.splits;
  const int split = c.x % a.splits;
  w.m0 = (tiles - 1 - c.x / a.splits) * BlockM;
  const int h = c.h, b = c.b;
  w.seqlen_k = a.seqlen_k;
  if (a.seqlens_k) w.seqlen_k = min(max(a.seqlens_k[b], 0), a.seqlen_k);
  w.diag = w.seqlen_k - a.seqlen_q;

  w.q_stride = static_cast<long long>(a.heads_q) * D;
  w.kv_stride = static_cast<long long>(a.heads_kv) * D;
  const long long q_head0 = (static_cast<long long>(b) * a.seqlen_q * a.heads_q + h) * D;
  const long long kv_head0 = (static_cast<long long>(b) * a.seqlen_k * a.heads_kv + h / a.group) * D;
  const long long lse_row0 = (static_cast<long long>(b) * a.heads_q + h) * a.seqlen_q;
  w.q = static_cast<const T*>(a.q) + q_head0;
  w.k = static_cast<const T*>(a.k) + kv_head0;
  w.v = static_cast<const T*>(a.v) + kv_head0;
  w.o = static_cast<T*>(a.o) + q_head0;
  w.lse = a.lse ? a.lse + lse_row0 : nullptr;
  const long long heads_rows = static_cast<long long>(c.batch) * a.heads_q * a.seqlen_q;  // rows of o
  w.o_part = a.splits > 1 ? a.o_part + split * heads_rows * D + q_head0 : nullptr;
  w.lse_part = a.splits > 1 ? a.lse_part + split * heads_rows + lse_row0 : nullptr;

  const KeyRange keys = key_range(a, w.seqlen_k, w.diag, w.m0, min(w.m0 + BlockM - 1, a.seqlen_q - 1));
  if (keys.any_lo > keys.any_hi) return false;
  w.n_first = keys.any_lo / BlockN;
  w.n_last = keys.any_hi / BlockN;
  if (w.o_part) {  // this split's contiguous chunk of the key tiles
    const int chunk = (w.n_last - w.n_first + a.splits) / a.splits;
    w.n_first += split * chunk;
    w.n_last = min(w.n_last, w.n_first + chunk - 1);
    if (w.n_first > w.n_last) return false;
  }
  return true;
}

// For work plan_work found empty, by `threads` threads (this one is `thread`): a split tells the combine it saw
// no key (lse_part -inf; the combine writes those rows' zeros); otherwise o's rows are 0 and lse -inf.
template <class T, int D, int BlockM>
__device__ __forceinline__ void write_no_keys(const Args& a, const BlockWork<T>& w, int thread, int threads) {
  if (w.o_part) {
    for (int r = thread; r < BlockM; r += threads)
      if (w.m0 + r < a.seqlen_q) w.lse_part[w.m0 + r] = -INFINITY;
    return;
  }
  for (int e = thread; e < BlockM * D; e += threads) {
    const int r = e / D;
    if (w.m0 + r < a.seqlen_q) w.o[(w.m0 + r) * w.q_stride + e % D] = static_cast<T>(0.0f);
  }
  for (int r = thread; r < BlockM; r += threads)
    if (w.lse && w.m0 + r < a.seqlen_q) w.lse[w.m0 + r] = -INFINITY;
}

// plan_work for the block's grid coordinates, grid (query tiles * splits, heads_q, batch); an empty block
// writes its rows with all its threads and returns false. Block-uniform.
template <class T, int D, int BlockM, int BlockN>
__device__ __forceinline__ bool plan_block(const Args& a, BlockWork<T>& w) {
  if (plan_work<T, D, BlockM, BlockN>(a, grid_coords(), w)) return true;
  write_no_keys<T, D, BlockM>(a, w, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
  return false;
}

// The keys [lo, hi] that rows `row` and `row + 8` see: a mask tile then compares each column against two
// numbers instead of working out the mask's rules per score.
template <class T>
__device__ __forceinline__ void row_key_bounds(const Args& a, const BlockWork<T>& w, int row, int (&lo)[2],
                                               int (&hi)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const KeyRange keys = key_range(a, w.seqlen_k, w.diag, row + 8 * r, row + 8 * r);
    lo[r] = keys.any_lo;
    hi[r] = keys.any_hi;
  }
}

// Scores of one fragment over key tile key0.. into the log2 domain (scaled, or softcapped), masked to -inf
// outside each row's [lo, hi] when need_mask. s: [KeyTiles][4] in the C layout; column0 = key0 + 2t.
template <int KeyTiles>
__device__ __forceinline__ void scale_and_mask(float (&s)[KeyTiles][4], const Args& a, bool need_mask,
                                               const int (&lo)[2], const int (&hi)[2], int column0) {
  if (a.cap_log2 > 0.0f) {  // uniform, so taken once for the whole tile
#pragma unroll
    for (int j = 0; j < KeyTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = a.cap_log2 * tanh_by_exp2(s[j][e] * a.cap_inner);
  } else {
#pragma unroll
    for (int j = 0; j < KeyTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] *= a.scale_log2;
  }
  if (!need_mask) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int first = lo[r] - column0, last = hi[r] - column0;  // visible columns 8j + c of row r
#pragma unroll
    for (int j = 0; j < KeyTiles; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c)
        if (8 * j + c < first || 8 * j + c > last) s[j][2 * r + c] = -INFINITY;
  }
}

// The online softmax step of one fragment without touching O: the tile's row maxima (over the quad's lanes),
// the running sums rescaled to the new maxima, and s replaced by P = 2^(s - max). Returns in `rescale` the
// factor O must be multiplied by before P V is added (the wgmma kernel applies it once the previous tile's
// P V, still in flight, has landed). A row that has seen no key keeps max -inf and takes exponents against 0,
// so its P is 0, never NaN. s: [KeyTiles][4]; row_max, row_sum: rows g and g + 8 (sum over this lane's columns).
template <int KeyTiles>
__device__ __forceinline__ void softmax_step(float (&s)[KeyTiles][4], float (&row_max)[2], float (&row_sum)[2],
                                             float (&rescale)[2]) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < KeyTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j][e]);
  float base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float new_max = fmaxf(row_max[r], tile_max[r]);
    base[r] = new_max == -INFINITY ? 0.0f : new_max;
    rescale[r] = exp2_approx(row_max[r] - base[r]);  // 0 while row_max is -inf
    row_max[r] = new_max;
    row_sum[r] *= rescale[r];
  }
#pragma unroll
  for (int j = 0; j < KeyTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[j][e] = exp2_approx(s[j][e] - base[e / 2]);
      row_sum[e / 2] += s[j][e];
    }
}

// O's rows g and g + 8 times their softmax rescale factors. acc_o: [DimTiles][4].
template <int DimTiles>
__device__ __forceinline__ void rescale_o(float (&acc_o)[DimTiles][4], const float (&rescale)[2]) {
#pragma unroll
  for (int j = 0; j < DimTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[j][e] *= rescale[e / 2];
}

// The whole online softmax step of one fragment: softmax_step, then O rescaled at once.
template <int KeyTiles, int DimTiles>
__device__ __forceinline__ void online_softmax(float (&s)[KeyTiles][4], float (&acc_o)[DimTiles][4],
                                               float (&row_max)[2], float (&row_sum)[2]) {
  float rescale[2];
  softmax_step(s, row_max, row_sum, rescale);
  rescale_o(acc_o, rescale);
}

// P's A fragment for keys 16kk..16kk+15: C tiles 2kk (a[0], a[1]) and 2kk + 1 (a[2], a[3]), rounded to T.
template <class T, int KeyTiles>
__device__ __forceinline__ void pack_p(const float (&s)[KeyTiles][4], int kk, std::uint32_t (&a)[4]) {
  a[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// Normalizes and stores one fragment's rows `row` and `row + 8` (this lane's columns 8j + 2t, +1): o in T
// and lse, or with a split, fp32 o_part (only for rows that saw a key: the combine drops the others by
// their lse) and lse_part. acc_o: [DimTiles][4]; row_sum: this lane's partial sums.
template <class T, int DimTiles>
__device__ __forceinline__ void store_rows(const Args& a, const BlockWork<T>& w, int row, int t,
                                           const float (&acc_o)[DimTiles][4], const float (&row_max)[2],
                                           const float (&row_sum)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int i = row + 8 * r;
    if (i >= a.seqlen_q) continue;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;  // a row without a visible key has sum 0 and o 0
    const float row_lse = sum > 0.0f ? row_max[r] * kLn2 + logf(sum) : -INFINITY;
    if (w.o_part) {
      float* part = w.o_part + i * w.q_stride;
      if (sum > 0.0f) {
#pragma unroll
        for (int j = 0; j < DimTiles; ++j)
          *reinterpret_cast<float2*>(part + 8 * j + 2 * t) =
              make_float2(acc_o[j][2 * r] * inv, acc_o[j][2 * r + 1] * inv);
      }
      if (t == 0) w.lse_part[i] = row_lse;
      continue;
    }
    T* out = w.o + i * w.q_stride;
#pragma unroll
    for (int j = 0; j < DimTiles; ++j)
      *reinterpret_cast<std::uint32_t*>(out + 8 * j + 2 * t) =
          pack2<T>(acc_o[j][2 * r] * inv, acc_o[j][2 * r + 1] * inv);
    if (w.lse && t == 0) w.lse[i] = row_lse;
  }
}

}  // namespace ignis::cuda::flash
