#pragma once
// What both flash attention backward kernels share (flash_backward.cu: mma.sync on any sm_80+ GPU;
// flash_backward_sm90.cuh: wgmma on Hopper): the launch arguments, the queries a key is seen by, the query
// steps a key block walks, and the stores of dK, dV and dQ. The row layouts are the C layout of
// flash_kernel_common.cuh (a warp's 16 rows: lane l holds rows l / 4 and l / 4 + 8, columns 8j + 2(l % 4), +1).
#include <cuda_runtime.h>

#include "cuda/ops/flash_kernel_common.cuh"

namespace ignis::cuda::flash {

struct BackwardArgs {
  const void* q;       // [batch, seqlen_q, heads_q, D]
  const void* k;       // [batch, seqlen_k, heads_kv, D]
  const void* v;       // [batch, seqlen_k, heads_kv, D]
  const void* dout;    // [batch, seqlen_q, heads_q, D]
  const float* lse;    // [batch, heads_q, seqlen_q], the forward's (natural log)
  const float* delta;  // [batch, heads_q, seqlen_q]
  float* dq_accum;     // [batch, seqlen_q, heads_q, D], zeroed
  void* dk;            // [batch, seqlen_k, heads_kv, D]
  void* dv;            // [batch, seqlen_k, heads_kv, D]
  int seqlen_q, seqlen_k, heads_q, heads_kv, group;
  float scale;       // of q.k
  float scale_log2;  // scale * log2(e), without softcap
  float cap_inner;   // scale / softcap
  float cap_log2;    // softcap * log2(e); 0 when softcap is off
  bool causal;
  int window_left, window_right;  // -1: unlimited
};

// The queries [lo, hi] that see key j, the key-side view of the forward's key_range: with diag = seqlen_k -
// seqlen_q, query i sees j when j <= i + diag (causal), j <= i + diag + window_right and j >= i + diag -
// window_left. lo > hi when none does (and for keys past seqlen_k). Both ends grow with j.
__device__ __forceinline__ void queries_of_key(const BackwardArgs& a, int j, int& lo, int& hi) {
  const int diag = a.seqlen_k - a.seqlen_q;
  lo = 0;
  hi = a.seqlen_q - 1;
  const int right = a.causal ? 0 : a.window_right;  // causal with a window_right >= 0: causal is the tighter
  if (right >= 0) lo = max(lo, j - diag - right);
  if (a.window_left >= 0) hi = min(hi, j - diag + a.window_left);
  if (j >= a.seqlen_k) hi = -1;
}

// The query steps of a block of keys [n0, n0 + BlockN): every query tile of StepM rows that sees one of its keys
// (from the first key's lowest query to the last key's highest), for each query head of the kv head's group.
// Returns false when no query sees any of the keys. Both ends of queries_of_key grow with the key, so no key
// of the block sees a query outside [first key's lo, last key's hi].
template <int BlockN, int StepM>
struct QuerySteps {
  int m_first, tiles, steps, first_head;
  __device__ __forceinline__ bool plan(const BackwardArgs& a, int n0, int kv_head) {
    first_head = kv_head * a.group;
    int lo_first, hi_first, lo_last, hi_last;
    queries_of_key(a, n0, lo_first, hi_first);
    queries_of_key(a, min(n0 + BlockN, a.seqlen_k) - 1, lo_last, hi_last);
    if (lo_first > hi_last) return false;
    m_first = lo_first / StepM;
    tiles = hi_last / StepM - m_first + 1;
    steps = tiles * a.group;
    return true;
  }
  // The query head and first query row of a step.
  __device__ __forceinline__ int head(int step) const { return first_head + step / tiles; }
  __device__ __forceinline__ int m0(int step) const { return (m_first + step % tiles) * StepM; }
};

// Copies the lse and delta of a step's StepM queries (query head h, rows m0..) into shared memory at `lse` and
// `delta` (addresses of StepM floats each), by threads 0 .. 2 StepM - 1 (cp.async, in the caller's group).
// Queries past seqlen_q read 0: their scores are masked and their dout rows are zeros.
template <int StepM>
__device__ __forceinline__ void load_step_stats(const BackwardArgs& a, int b, int h, int m0, std::uint32_t lse,
                                                std::uint32_t delta) {
  if (threadIdx.x >= 2 * StepM) return;
  const int r = threadIdx.x % StepM;
  const bool valid = m0 + r < a.seqlen_q;
  const float* src = threadIdx.x < StepM ? a.lse : a.delta;
  const long long row = (static_cast<long long>(b) * a.heads_q + h) * a.seqlen_q + m0 + r;
  cp_async_4((threadIdx.x < StepM ? lse : delta) + 4 * r, valid ? src + row : src, valid);
}

// One warp's 16 keys x kQueries of a step, from the scores S^T (s) and dP^T = V dout^T (dp): P^T = 2^(S^T log2 e
// - lse log2 e) into s and dS^T = scale P^T (dP^T - delta) (times 1 - tanh^2 under softcap) into dp. Lane columns
// 8j + 2t, +1 are queries m0 + 8j + 2t, +1; a score outside its key's queries [lo, hi] gets P = 0 by a select,
// whatever exp2 gave for it (a query with no visible key has lse -inf). lse, delta: the step's kQueries values
// in shared memory. s, dp: [kQueries / 8][4].
template <int Tiles>
__device__ __forceinline__ void probs_and_grads(float (&s)[Tiles][4], float (&dp)[Tiles][4], const BackwardArgs& a,
                                                const float* lse, const float* delta, int m0, int t,
                                                const int (&lo)[2], const int (&hi)[2]) {
  constexpr int kQueries = Tiles * 8;
  const bool need_mask = !(lo[0] <= m0 && m0 + kQueries - 1 <= hi[0] && lo[1] <= m0 && m0 + kQueries - 1 <= hi[1]);
#pragma unroll
  for (int j = 0; j < Tiles; ++j) {
    const float2 row_lse = *reinterpret_cast<const float2*>(lse + 8 * j + 2 * t);
    const float2 row_delta = *reinterpret_cast<const float2*>(delta + 8 * j + 2 * t);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = e & 1, r = e / 2;
      float x = s[j][e], dcap = 1.0f;
      if (a.cap_log2 > 0.0f) {
        const float th = tanh_by_exp2(x * a.cap_inner);
        x = a.cap_log2 * th;
        dcap = 1.0f - th * th;
      } else {
        x *= a.scale_log2;
      }
      float p = exp2_approx(fmaf(-(c ? row_lse.y : row_lse.x), static_cast<float>(kLog2e), x));
      const int i = m0 + 8 * j + 2 * t + c;
      if (need_mask && (i < lo[r] || i > hi[r])) p = 0.0f;
      s[j][e] = p;
      dp[j][e] = p * (dp[j][e] - (c ? row_delta.y : row_delta.x)) * (dcap * a.scale);
    }
  }
}

// Adds two fp32 values to consecutive accumulator elements (8-byte aligned): one vector atomic on sm_90.
__device__ __forceinline__ void add_pair(float* at, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(at), make_float2(x, y));
#else
  atomicAdd(at, x);
  atomicAdd(at + 1, y);
#endif
}

// Stores one warp's 16 rows of a [16, D] accumulator (C layout) as T: rows row0 + g and row0 + g + 8 that are
// below `rows`. acc: [D / 8][4]; base: [rows, D], rows `stride` elements apart.
template <class T, int D>
__device__ __forceinline__ void store_key_rows(T* base, long long stride, int row0, int rows, int g, int t,
                                               const float (&acc)[D / 8][4]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = row0 + g + 8 * r;
    if (j >= rows) continue;
#pragma unroll
    for (int c = 0; c < D / 8; ++c)
      *reinterpret_cast<std::uint32_t*>(base + j * stride + 8 * c + 2 * t) =
          pack2<T>(acc[c][2 * r], acc[c][2 * r + 1]);
  }
}


}  // namespace ignis::cuda::flash
