// Naive attention: one thread block per (batch, query head, query row). The visible keys of a row
// form one contiguous range; the block walks it in chunks of kChunk keys with an online softmax,
// so any sequence length works with a fixed amount of shared memory. Per chunk, each warp scores
// keys (lanes split the q.k dot product), the block takes the chunk max, turns scores into
// weights, and each thread accumulates the weighted V rows for its own output dimensions.
// Accumulates in fp32 (fp64 for fp64 inputs).
#include <climits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/ops/attention_naive.h"
#include "ignis/ops/attention.h"

namespace ignis::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = kThreads;  // one score per thread for the chunk reductions
constexpr int kMaxHeadDim = static_cast<int>(kAttentionNaiveMaxHeadDim);
constexpr int kDimsPerThread = (kMaxHeadDim + kThreads - 1) / kThreads;

template <class T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};

template <class T>
__device__ __forceinline__ float to_acc(T v) {
  return to_float(v);
}
__device__ __forceinline__ double to_acc(double v) { return v; }

__device__ __forceinline__ float exp_of(float x) { return expf(x); }
__device__ __forceinline__ double exp_of(double x) { return exp(x); }
__device__ __forceinline__ float log_of(float x) { return logf(x); }
__device__ __forceinline__ double log_of(double x) { return log(x); }
__device__ __forceinline__ float tanh_of(float x) { return tanhf(x); }
__device__ __forceinline__ double tanh_of(double x) { return tanh(x); }
__device__ __forceinline__ float max_of(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_of(double a, double b) { return fmax(a, b); }

struct MaxOf {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return max_of(a, b);
  }
};

template <class A>
struct Args {
  long long seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  A scale, softcap;
  bool causal;
  long long window_left, window_right;
  // A KV cache: k/v hold seqlen_k (the capacity) rows per sequence, of which sequence b uses the
  // first seqlens_k[b], read on the device so a captured decode step replays at any length.
  const int* seqlens_k = nullptr;  // [batch] or null
};

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim];
// lse: [batch, heads_q, seqlen_q] or null.
template <class T, class A = typename AccOf<T>::type>
__global__ void __launch_bounds__(kThreads)
    attention_naive_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                           T* __restrict__ o, A* __restrict__ lse, Args<A> a) {
  __shared__ A q_row[kMaxHeadDim];
  __shared__ A weights[kChunk];
  __shared__ A scratch[32];

  // Query rows vary fastest across blocks, so neighbouring blocks read the same K/V head.
  const long long block = blockIdx.x;
  const long long i = block % a.seqlen_q;
  const long long h = (block / a.seqlen_q) % a.heads_q;
  const long long b = block / (a.seqlen_q * a.heads_q);
  const long long D = a.head_dim;
  const long long key_stride = a.heads_kv * D;
  const long long kv_head = h / (a.heads_q / a.heads_kv);
  const long long q_offset = ((b * a.seqlen_q + i) * a.heads_q + h) * D;
  const long long kv_offset = (b * a.seqlen_k * a.heads_kv + kv_head) * D;  // key 0 of this head
  const T* k_row0 = k + kv_offset;
  const T* v_row0 = v + kv_offset;
  T* out = o + q_offset;
  A* out_lse = lse ? lse + (b * a.heads_q + h) * a.seqlen_q + i : nullptr;
  // A device length outside [0, capacity] is clamped rather than read out of bounds.
  long long seqlen_k = a.seqlen_k;
  if (a.seqlens_k) seqlen_k = min(max(static_cast<long long>(a.seqlens_k[b]), 0LL), a.seqlen_k);

  // Visible keys [first, last], around the bottom-right aligned diagonal.
  const long long diag = i + seqlen_k - a.seqlen_q;
  long long first = 0, last = seqlen_k - 1;
  if (a.causal && diag < last) last = diag;
  if (a.window_right >= 0 && diag + a.window_right < last) last = diag + a.window_right;
  if (a.window_left >= 0 && diag - a.window_left > first) first = diag - a.window_left;

  if (first > last) {  // the same for the whole block, so returning early is safe
    for (long long d = threadIdx.x; d < D; d += kThreads) out[d] = static_cast<T>(0);
    if (threadIdx.x == 0 && out_lse) *out_lse = -INFINITY;
    return;
  }

  for (long long d = threadIdx.x; d < D; d += kThreads) q_row[d] = to_acc(q[q_offset + d]);
  __syncthreads();

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  A row_max = -INFINITY;  // over the chunks seen so far
  A sum = 0;              // this thread's share of sum(exp(s - row_max))
  A acc[kDimsPerThread];  // output dims threadIdx.x + r * kThreads, times the softmax denominator
#pragma unroll
  for (int r = 0; r < kDimsPerThread; ++r) acc[r] = 0;

  for (long long start = first; start <= last; start += kChunk) {
    const int n = static_cast<int>(last - start + 1 < kChunk ? last - start + 1 : kChunk);
    // n is block-uniform and jj warp-uniform, so every lane of a warp reaches the shuffles.
    for (int jj = warp; jj < n; jj += kWarps) {
      const T* key = k_row0 + (start + jj) * key_stride;
      A dot = 0;
      for (long long d = lane; d < D; d += 32) dot += q_row[d] * to_acc(key[d]);
      dot = warp_reduce(dot, Sum{});
      if (lane == 0) {
        A s = dot * a.scale;
        if (a.softcap > 0) s = a.softcap * tanh_of(s / a.softcap);
        weights[jj] = s;
      }
    }
    __syncthreads();
    const A s = threadIdx.x < n ? weights[threadIdx.x] : static_cast<A>(-INFINITY);
    const A new_max = max_of(row_max, block_reduce(s, MaxOf{}, scratch));
    const A rescale = exp_of(row_max - new_max);  // 0 on the first chunk (row_max = -inf)
    const A p = threadIdx.x < n ? exp_of(s - new_max) : static_cast<A>(0);
    weights[threadIdx.x] = p;  // only this thread read weights[threadIdx.x] since the last barrier
    sum = sum * rescale + p;
    row_max = new_max;
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kDimsPerThread; ++r) {
      const long long d = threadIdx.x + r * kThreads;
      if (d >= D) break;
      const T* value = v_row0 + start * key_stride + d;
      A total = acc[r] * rescale;
      for (int jj = 0; jj < n; ++jj) total += weights[jj] * to_acc(value[jj * key_stride]);
      acc[r] = total;
    }
    __syncthreads();  // the next chunk overwrites weights
  }

  const A denominator = block_reduce(sum, Sum{}, scratch);
  const A inv = static_cast<A>(1) / denominator;
#pragma unroll
  for (int r = 0; r < kDimsPerThread; ++r) {
    const long long d = threadIdx.x + r * kThreads;
    if (d < D) out[d] = static_cast<T>(acc[r] * inv);
  }
  if (threadIdx.x == 0 && out_lse) *out_lse = row_max + log_of(denominator);
}

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim];
// lse: [batch, heads_q, seqlen_q] or no data; seqlens_k: [batch] or null.
template <class T>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
            const int* seqlens_k, const AttentionParams& params, Stream stream) {
  using A = typename AccOf<T>::type;
  const Args<A> args{q.size(1),
                     k.size(1),
                     q.size(2),
                     k.size(2),
                     q.size(3),
                     static_cast<A>(params.scale),
                     static_cast<A>(params.softcap),
                     params.causal,
                     params.window_left,
                     params.window_right,
                     seqlens_k};
  const long long rows = q.size(0) * q.size(1) * q.size(2);
  if (rows == 0) return;
  check_arg(rows <= INT_MAX, "attention_naive_forward", "batch * heads_q * seqlen_q", "<= 2147483647", rows);
  attention_naive_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, to_cuda(stream)>>>(
      q.data_as<const T>(), k.data_as<const T>(), v.data_as<const T>(), o.data_as<T>(), static_cast<A*>(lse.data()),
      args);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

void attention_naive_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const int* seqlens_k, const AttentionParams& params, Stream stream) {
  switch (q.dtype()) {
    case DType::f32: return launch<float>(q, k, v, o, lse, seqlens_k, params, stream);
    case DType::f64: return launch<double>(q, k, v, o, lse, seqlens_k, params, stream);
    default: fail_expected("attention_naive_forward", "q.dtype", "f32 or f64", q.dtype());
  }
}

}  // namespace ignis::cuda
