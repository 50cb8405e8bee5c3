// Cross-entropy, forward and backward, in three launches on one stream:
//   1. one block counts the non-pad targets (the gradient's divisor) and records bad targets;
//   2. the rows: when a row fits on chip (row_cache.cuh: one block, or a cluster of up to 8 on
//      sm_90), its logits are copied once into shared memory, reduced to the logsumexp, and
//      dlogits is written from there. Otherwise one block per row streams it: an online logsumexp
//      pass, then a second pass writing dlogits (the logits are read twice);
//   3. one block sums the row losses in fp64 in a fixed order and writes the mean: deterministic.
// Rows that are not 16-byte aligned (odd vocab sizes) split into a scalar head up to the first
// 16-byte boundary, whole packs, and a scalar tail, so every vocabulary gets vector loads.
#include "cuda/common/convert.cuh"
#include "cuda/common/index_flag.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/row_cache.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/cross_entropy.h"

namespace ignis::cuda {
namespace {

constexpr int kUnroll = 4;  // packs in flight per thread in the statistics pass

// targets: [n]; flag: [3] (index_flag.cuh); count: the non-pad targets.
template <class Id>
__global__ void count_targets_kernel(const Id* __restrict__ targets, long long n, long long vocab, long long pad,
                                     int* count, long long* flag) {
  __shared__ int scratch[32];
  int local = 0;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    const long long t = static_cast<long long>(targets[i]);
    if (t == pad) continue;
    if (t < 0 || t >= vocab) {
      record_bad_index(flag, i, t, vocab);
      continue;
    }
    ++local;
  }
  local = block_reduce(local, Sum{}, scratch);
  if (threadIdx.x == 0) *count = local;
}

// A row of `cols` elements at `row`: [0, head) scalars up to the first 16-byte boundary, then
// whole packs of V up to body_end, then scalars. V = 1 is all body.
struct RowSplit {
  long long head;
  long long body_end;
};

// row: [cols].
template <class T, int V>
__device__ __forceinline__ RowSplit split_row(const T* row, long long cols) {
  if (V == 1) return {0, cols};
  const long long misaligned = static_cast<long long>(reinterpret_cast<std::uintptr_t>(row) % 16 / sizeof(T));
  const long long head = misaligned == 0 ? 0 : min(cols, static_cast<long long>(V) - misaligned);
  return {head, head + (cols - head) / V * V};
}

// Folds the N values of v into the running (max, sum of exp(x - max)).
template <int N>
__device__ __forceinline__ void accumulate(SoftmaxState& state, const float (&v)[N]) {
  float chunk_max = v[0];
#pragma unroll
  for (int i = 1; i < N; ++i) chunk_max = fmaxf(chunk_max, v[i]);
  if (chunk_max == -INFINITY) return;
  const float m = fmaxf(state.max, chunk_max);
  float sum = state.sum * expf(state.max - m);  // state.max = -inf gives 0
#pragma unroll
  for (int i = 0; i < N; ++i) sum += expf(v[i] - m);
  state = {m, sum};
}

// in: [cols], one row.
template <class T, int V>
__device__ SoftmaxState row_statistics(const T* __restrict__ in, long long cols, RowSplit split) {
  SoftmaxState state{-INFINITY, 0.0f};
  for (long long c = threadIdx.x; c < split.head; c += blockDim.x) accumulate<1>(state, {to_float(in[c])});
  for (long long c = split.body_end + threadIdx.x; c < cols; c += blockDim.x)
    accumulate<1>(state, {to_float(in[c])});
  const long long step = static_cast<long long>(blockDim.x) * V;
  for (long long base = split.head + threadIdx.x * V; base < split.body_end; base += step * kUnroll) {
    float v[kUnroll * V];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long c = base + u * step;
      float pack[V];
      if (c < split.body_end) {
        load_floats<T, V>(in + c, pack);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) pack[i] = -INFINITY;
      }
#pragma unroll
      for (int i = 0; i < V; ++i) v[u * V + i] = pack[i];
    }
    accumulate<kUnroll * V>(state, v);
  }
  return state;
}

// d loss / d x for one element: (softmax - onehot) / count.
__device__ __forceinline__ float grad_of(float x, float lse, float inv_count, bool is_target) {
  return exp_minus(x, lse) * inv_count - (is_target ? inv_count : 0.0f);
}

// logits and dlogits may be one tensor (an in-place gradient): every logit is read before the
// block's barrier or by the thread that then overwrites it, so they are not __restrict__.
// logits, dlogits: [n, vocab] (dlogits may be null), a row a block; targets, row_loss: [n].
template <class T, int V, class Id>
__global__ void cross_entropy_kernel(const T* logits, const Id* __restrict__ targets, long long vocab, long long pad,
                                     const int* __restrict__ count, T* dlogits, float* __restrict__ row_loss) {
  __shared__ SoftmaxState scratch[32];
  const long long row = blockIdx.x;
  const T* in = logits + row * vocab;
  T* grad = dlogits ? dlogits + row * vocab : nullptr;
  const long long target = static_cast<long long>(targets[row]);
  const RowSplit split = split_row<T, V>(in, vocab);

  // Pad rows (and bad targets, already recorded by count_targets_kernel) take no part.
  if (target == pad || target < 0 || target >= vocab) {
    if (threadIdx.x == 0) row_loss[row] = 0.0f;
    if (!grad) return;
    for (long long c = threadIdx.x; c < vocab; c += blockDim.x) grad[c] = from_float<T>(0.0f);
    return;
  }

  const float target_logit = to_float(in[target]);
  const SoftmaxState state = block_reduce(row_statistics<T, V>(in, vocab, split), MergeSoftmax{}, scratch);
  const float lse = state.max + logf(state.sum);
  if (threadIdx.x == 0) row_loss[row] = lse - target_logit;
  if (!grad) return;

  const float inv_count = 1.0f / static_cast<float>(*count);  // >= 1: this row counts
  for (long long c = threadIdx.x; c < split.head; c += blockDim.x)
    grad[c] = from_float<T>(grad_of(to_float(in[c]), lse, inv_count, c == target));
  for (long long c = split.body_end + threadIdx.x; c < vocab; c += blockDim.x)
    grad[c] = from_float<T>(grad_of(to_float(in[c]), lse, inv_count, c == target));
  const long long step = static_cast<long long>(blockDim.x) * V;
  for (long long c = split.head + threadIdx.x * V; c < split.body_end; c += step) {
    float v[V];
    load_floats<T, V>(in + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = grad_of(v[i], lse, inv_count, c + i == target);
    store_floats<T, V>(grad + c, v);
  }
}

// The cached form of cross_entropy_kernel: `cluster` blocks a row, each caching its slice of the
// row's whole packs in shared memory; rank 0's first threads also hold the head and tail scalars.
// logits, dlogits: [n, vocab] (dlogits may be null); targets, row_loss: [n].
template <class T, int V, class Id>
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_cached_kernel(const T* logits, const Id* __restrict__ targets, long long vocab, long long pad,
                                const int* __restrict__ count, T* dlogits, float* __restrict__ row_loss,
                                int cluster) {
  using P = Pack<T, V>;
  __shared__ SoftmaxState scratch[32];
  __shared__ SoftmaxState slots[kMaxCluster];
  const long long row = blockIdx.x / cluster;
  const bool lead = blockIdx.x % cluster == 0;
  const T* in = logits + row * vocab;
  T* grad = dlogits ? dlogits + row * vocab : nullptr;
  const long long target = static_cast<long long>(targets[row]);
  const RowSplit split = split_row<T, V>(in, vocab);
  const RowSlice s = row_slice((split.body_end - split.head) / V, cluster);
  const long long scalars = split.head + vocab - split.body_end;  // < 2V <= 32 threads
  const long long scalar = !lead || threadIdx.x >= scalars ? -1
                           : threadIdx.x < split.head     ? threadIdx.x
                                                          : split.body_end + threadIdx.x - split.head;
  P* grad_body = grad ? reinterpret_cast<P*>(grad + split.head) : nullptr;

  // Pad rows (and bad targets, already recorded by count_targets_kernel) take no part. The
  // condition is the same for the whole cluster, so no block waits at a cluster barrier alone.
  if (target == pad || target < 0 || target >= vocab) {
    if (lead && threadIdx.x == 0) row_loss[row] = 0.0f;
    if (!grad) return;
    const float zeros[V] = {};
    for (long long k = s.first + threadIdx.x; k < s.end; k += blockDim.x) store_pack(grad_body + k, zeros);
    if (scalar >= 0) grad[scalar] = from_float<T>(0.0f);
    return;
  }

  if (cluster > 1) cluster_arrive_started();  // after the pad-row exit: a pad row's cluster has no barrier
  // Every logit this thread needs is read before it writes any (each thread writes only the packs
  // it cached) and the target logit before the block's first barrier: an in-place gradient is safe.
  P* cache = slice_cache<P>(s, 0);
  copy_slice(reinterpret_cast<const P*>(in + split.head), s, cache);
  const float extra = scalar >= 0 ? to_float(in[scalar]) : -INFINITY;
  const float target_logit = lead && threadIdx.x == 0 ? to_float(in[target]) : 0.0f;
  wait_copies();
  const SoftmaxState state = row_softmax_state<T, V>(cache, s, extra, cluster, scratch, slots);
  const float lse = state.max + logf(state.sum);
  if (lead && threadIdx.x == 0) row_loss[row] = lse - target_logit;
  if (!grad) return;

  const float inv_count = 1.0f / static_cast<float>(*count);  // >= 1: this row counts
  for (long long k = threadIdx.x; k < s.end - s.first; k += blockDim.x) {
    const P p = cache[k];
    const long long c = split.head + (s.first + k) * V;
    float v[V];
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = grad_of(to_float(p.v[i]), lse, inv_count, false);
    // The one pack holding the target also subtracts 1 / count (grad_of's target term, the same
    // bits): one 64-bit test a pack instead of one an element.
    const long long at = target - c;
    if (at >= 0 && at < V) {
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (i == at) v[i] -= inv_count;
    }
    store_pack(grad_body + s.first + k, v);
  }
  if (scalar >= 0) grad[scalar] = from_float<T>(grad_of(extra, lse, inv_count, scalar == target));
}

// row_loss: [n].
__global__ void mean_loss_kernel(const float* __restrict__ row_loss, long long n, const int* __restrict__ count,
                                 float* __restrict__ loss) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) sum += row_loss[i];
  sum = block_reduce(sum, Sum{}, scratch);
  if (threadIdx.x == 0) *loss = *count > 0 ? static_cast<float>(sum / *count) : 0.0f;
}

// Enough threads for a few unrolled steps each, between one warp and 512.
int threads_for(long long vocab, int vec) {
  const long long packs = (vocab + vec - 1) / vec;
  int threads = 32;
  while (threads < 512 && threads * kUnroll * 2 < packs) threads *= 2;
  return threads;
}

// Launches the cached kernel when a row's packs fit on chip; false leaves the rows to the
// streaming kernel.
// in (logits), grad (dlogits, or null): [n, vocab]; t (targets), rows (row losses): [n].
template <class T, class Id>
bool try_cached(const T* in, const Id* t, long long n, long long vocab, long long pad, const int* count, T* grad,
                float* rows, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  // Rows whose head is cut off hold at most vocab / V whole packs: the plan covers them all.
  const RowPlan plan = plan_rows(n, vocab / V, 1);
  return plan.cluster > 0 && launch_rows(cross_entropy_cached_kernel<T, V, Id>, plan, n, stream, in, t, vocab, pad,
                                         count, grad, rows, plan.cluster);
}

// Step 2: the cached kernel where the rows fit on chip, else the streaming one.
// in (logits), grad (dlogits, or null): [n, vocab]; t (targets), rows (row losses): [n].
template <class T, class Id>
void launch_rows_of(const T* in, const Id* t, long long n, long long vocab, long long pad, const int* count, T* grad,
                    float* rows, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  // Both rows must share their misalignment for one split to serve the load and the store.
  const auto offset = reinterpret_cast<std::uintptr_t>(in) - reinterpret_cast<std::uintptr_t>(grad ? grad : in);
  const bool vectorized = offset % 16 == 0;
  if (vectorized && try_cached<T, Id>(in, t, n, vocab, pad, count, grad, rows, stream)) return;
  const int threads = threads_for(vocab, vectorized ? V : 1);
  if (vectorized)
    cross_entropy_kernel<T, V, Id>
        <<<static_cast<unsigned>(n), threads, 0, to_cuda(stream)>>>(in, t, vocab, pad, count, grad, rows);
  else
    cross_entropy_kernel<T, 1, Id>
        <<<static_cast<unsigned>(n), threads, 0, to_cuda(stream)>>>(in, t, vocab, pad, count, grad, rows);
  IGNIS_CHECK_LAUNCH();
}

// logits: [n, vocab]; targets: [n]; loss: [1] f32; dlogits: [n, vocab] or undefined; row_loss: [n] f32 or
// undefined; flag: [3].
template <class T, class Id>
void launch(const Tensor& logits, const Tensor& targets, long long pad, const Tensor& loss, const Tensor& dlogits,
            const Tensor& row_loss, long long* flag, Stream stream) {
  const long long n = logits.size(0), vocab = logits.size(1);
  const std::size_t count_bytes = align_up(sizeof(int));
  Scratch scratch(count_bytes + (row_loss.defined() ? 0 : sizeof(float) * n), stream);
  int* count = scratch.at<int>(0);
  float* rows = row_loss.defined() ? row_loss.data_as<float>() : scratch.at<float>(count_bytes);
  const Id* t = targets.data_as<const Id>();

  count_targets_kernel<Id><<<1, 1024, 0, to_cuda(stream)>>>(t, n, vocab, pad, count, flag);
  IGNIS_CHECK_LAUNCH();
  if (n > 0) launch_rows_of<T, Id>(logits.data_as<const T>(), t, n, vocab, pad, count,
                                   dlogits.defined() ? dlogits.data_as<T>() : nullptr, rows, stream);
  mean_loss_kernel<<<1, 1024, 0, to_cuda(stream)>>>(rows, n, count, loss.data_as<float>());
  IGNIS_CHECK_LAUNCH();
}

// logits: [n, vocab]; targets: [n]; loss: [1]; dlogits: [n, vocab] or undefined; row_loss: [n] or undefined.
template <class T>
void launch_any_targets(const Tensor& logits, const Tensor& targets, long long pad, const Tensor& loss,
                        const Tensor& dlogits, const Tensor& row_loss, long long* flag, Stream stream) {
  if (targets.dtype() == DType::i32)
    return launch<T, std::int32_t>(logits, targets, pad, loss, dlogits, row_loss, flag, stream);
  launch<T, std::int64_t>(logits, targets, pad, loss, dlogits, row_loss, flag, stream);
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                   const Tensor& dlogits, const Tensor& row_loss, long long* flag, Stream stream) {
  switch (logits.dtype()) {
    case DType::f32: return launch_any_targets<float>(logits, targets, pad_id, loss, dlogits, row_loss, flag, stream);
    case DType::f16:
      return launch_any_targets<__half>(logits, targets, pad_id, loss, dlogits, row_loss, flag, stream);
    case DType::bf16:
      return launch_any_targets<__nv_bfloat16>(logits, targets, pad_id, loss, dlogits, row_loss, flag, stream);
    default: fail_expected("cross_entropy", "logits.dtype", "f32, f16 or bf16", logits.dtype());
  }
}

bool cross_entropy_checked(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                           const Tensor& dlogits, const Tensor& row_loss, Stream stream) {
  Scratch scratch(kIndexFlagBytes, stream);
  auto* flag = scratch.at<long long>(0);
  clear_index_flag(flag, stream);
  cross_entropy(logits, targets, pad_id, loss, dlogits, row_loss, flag, stream);
  long long record[3];
  read_index_flag(flag, record, stream);
  return record[0] >= 0;
}

}  // namespace ignis::cuda
