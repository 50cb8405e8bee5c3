// Softmax over rows. Rows of whole 16-byte packs that fit on chip (row_cache.cuh: up to ~220 KB a
// block, 16 blocks of a cluster on H100/H200) are copied once into shared memory, reduced, and
// written from there: one read and one write. Other rows (longer, unaligned, or past one block on a
// pre-sm_90 device) use the streaming kernels: one block per row, any length, reading the row
// twice (statistics pass, then the output pass).
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/row_cache.cuh"
#include "cuda/ops/softmax.h"

namespace ignis::cuda {
namespace {

// One row per cluster of `cluster` blocks; each block caches its slice in shared memory.
template <class T, int V>
__global__ void __launch_bounds__(kRowThreads)
    softmax_cached_kernel(const T* __restrict__ x, T* __restrict__ y, long long cols, int cluster) {
  using P = Pack<T, V>;
  __shared__ SoftmaxState scratch[32];
  __shared__ SoftmaxState slot;
  const RowSlice s = row_slice(cols / V, cluster);
  P* cache = slice_cache<P>(s, 0);
  copy_slice(reinterpret_cast<const P*>(x + s.row * cols), s, cache);
  wait_copies();
  const SoftmaxState state = row_softmax_state<T, V>(cache, s, -INFINITY, cluster, scratch, &slot);
  // A row of all -inf has no visible element: it outputs zeros rather than 0/0.
  const float inv_sum = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;
  const float row_max = state.max == -INFINITY ? 0.0f : state.max;
  P* out = reinterpret_cast<P*>(y + s.row * cols);
  for (long long k = threadIdx.x; k < s.end - s.first; k += blockDim.x) {
    const P p = cache[k];
    float v[V];
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = exp_minus(to_float(p.v[i]), row_max) * inv_sum;
    store_pack(out + s.first + k, v);
  }
}

template <class T, int V>
__global__ void __launch_bounds__(kRowThreads)
    softmax_backward_cached_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                   long long cols, int cluster) {
  using P = Pack<T, V>;
  __shared__ float scratch[32];
  __shared__ float slot;
  const RowSlice s = row_slice(cols / V, cluster);
  P* yc = slice_cache<P>(s, 0);
  P* gc = slice_cache<P>(s, 1);
  copy_slice(reinterpret_cast<const P*>(y + s.row * cols), s, yc);
  copy_slice(reinterpret_cast<const P*>(dy + s.row * cols), s, gc);
  wait_copies();
  const long long count = s.end - s.first;
  float dot = 0.0f;
  for (long long k = threadIdx.x; k < count; k += blockDim.x) {
    const P a = yc[k], b = gc[k];
#pragma unroll
    for (int i = 0; i < V; ++i) dot += to_float(a.v[i]) * to_float(b.v[i]);
  }
  dot = row_reduce(dot, Sum{}, 0.0f, cluster, scratch, &slot);

  P* out = reinterpret_cast<P*>(dx + s.row * cols);
  for (long long k = threadIdx.x; k < count; k += blockDim.x) {
    const P a = yc[k], b = gc[k];
    float v[V];
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = to_float(a.v[i]) * (to_float(b.v[i]) - dot);
    store_pack(out + s.first + k, v);
  }
}

// Streaming kernels. V elements per thread per step: 16-byte packs when the row allows, else 1.
template <class T, int V>
__global__ void softmax_forward_kernel(const T* __restrict__ x, T* __restrict__ y, long long cols) {
  __shared__ SoftmaxState scratch[32];
  const T* in = x + blockIdx.x * cols;
  T* out = y + blockIdx.x * cols;
  const long long step = static_cast<long long>(blockDim.x) * V;

  SoftmaxState state{-INFINITY, 0.0f};
  for (long long c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    load_floats<T, V>(in + c, v);
    float chunk_max = v[0];
#pragma unroll
    for (int i = 1; i < V; ++i) chunk_max = fmaxf(chunk_max, v[i]);
    if (chunk_max == -INFINITY) continue;
    const float m = fmaxf(state.max, chunk_max);
    float sum = state.sum * expf(state.max - m);  // state.max = -inf gives 0 * 0
#pragma unroll
    for (int i = 0; i < V; ++i) sum += expf(v[i] - m);
    state = {m, sum};
  }
  state = block_reduce(state, MergeSoftmax{}, scratch);

  // A row of all -inf has no visible element: it outputs zeros rather than 0/0.
  const float inv_sum = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;
  const float row_max = state.max == -INFINITY ? 0.0f : state.max;
  for (long long c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    load_floats<T, V>(in + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = expf(v[i] - row_max) * inv_sum;
    store_floats<T, V>(out + c, v);
  }
}

template <class T, int V>
__global__ void softmax_backward_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                        long long cols) {
  __shared__ float scratch[32];
  const long long row = static_cast<long long>(blockIdx.x) * cols;
  const long long step = static_cast<long long>(blockDim.x) * V;

  float dot = 0.0f;
  for (long long c = threadIdx.x * V; c < cols; c += step) {
    float yv[V], gv[V];
    load_floats<T, V>(y + row + c, yv);
    load_floats<T, V>(dy + row + c, gv);
#pragma unroll
    for (int i = 0; i < V; ++i) dot += yv[i] * gv[i];
  }
  dot = block_reduce(dot, Sum{}, scratch);

  for (long long c = threadIdx.x * V; c < cols; c += step) {
    float yv[V], gv[V];
    load_floats<T, V>(y + row + c, yv);
    load_floats<T, V>(dy + row + c, gv);
#pragma unroll
    for (int i = 0; i < V; ++i) yv[i] = yv[i] * (gv[i] - dot);
    store_floats<T, V>(dx + row + c, yv);
  }
}

// Enough threads to give each a few packs, between one warp and 1024.
int threads_for(long long cols, int vec) {
  const long long packs = (cols + vec - 1) / vec;
  int threads = 32;
  while (threads < 1024 && threads * 4 < packs) threads *= 2;
  return threads;
}

// Launches the cached kernel when the rows are whole 16-byte packs that fit on chip; false leaves
// them to the streaming kernel.
template <class T, int V>
bool try_cached_forward(const T* in, T* out, long long rows, long long cols, Stream stream) {
  const RowPlan plan = plan_rows(rows, cols / V, 1);
  return plan.cluster > 0 && launch_rows(softmax_cached_kernel<T, V>, plan, rows, stream, in, out, cols, plan.cluster);
}

template <class T, int V>
bool try_cached_backward(const T* yp, const T* gp, T* out, long long rows, long long cols, Stream stream) {
  const RowPlan plan = plan_rows(rows, cols / V, 2);
  return plan.cluster > 0 &&
         launch_rows(softmax_backward_cached_kernel<T, V>, plan, rows, stream, yp, gp, out, cols, plan.cluster);
}

template <class T>
void launch_forward(const Tensor& x, const Tensor& y, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = x.size(0), cols = x.size(1);
  if (rows == 0 || cols == 0) return;
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  const bool vectorized = cols % V == 0 && pack_aligned<T, V>(in) && pack_aligned<T, V>(out);
  if (vectorized && try_cached_forward<T, V>(in, out, rows, cols, stream)) return;
  const int threads = threads_for(cols, vectorized ? V : 1);
  if (vectorized)
    softmax_forward_kernel<T, V><<<rows, threads, 0, to_cuda(stream)>>>(in, out, cols);
  else
    softmax_forward_kernel<T, 1><<<rows, threads, 0, to_cuda(stream)>>>(in, out, cols);
  IGNIS_CHECK_LAUNCH();
}

template <class T>
void launch_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = y.size(0), cols = y.size(1);
  if (rows == 0 || cols == 0) return;
  const T* yp = y.data_as<const T>();
  const T* gp = dy.data_as<const T>();
  T* out = dx.data_as<T>();
  const bool vectorized =
      cols % V == 0 && pack_aligned<T, V>(yp) && pack_aligned<T, V>(gp) && pack_aligned<T, V>(out);
  if (vectorized && try_cached_backward<T, V>(yp, gp, out, rows, cols, stream)) return;
  const int threads = threads_for(cols, vectorized ? V : 1);
  if (vectorized)
    softmax_backward_kernel<T, V><<<rows, threads, 0, to_cuda(stream)>>>(yp, gp, out, cols);
  else
    softmax_backward_kernel<T, 1><<<rows, threads, 0, to_cuda(stream)>>>(yp, gp, out, cols);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

void softmax_forward(const Tensor& x, const Tensor& y, Stream stream) {
  switch (x.dtype()) {
    case DType::f32: return launch_forward<float>(x, y, stream);
    case DType::f16: return launch_forward<__half>(x, y, stream);
    case DType::bf16: return launch_forward<__nv_bfloat16>(x, y, stream);
    default: fail_expected("softmax_forward", "x.dtype", "f32, f16 or bf16", x.dtype());
  }
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Stream stream) {
  switch (y.dtype()) {
    case DType::f32: return launch_backward<float>(y, dy, dx, stream);
    case DType::f16: return launch_backward<__half>(y, dy, dx, stream);
    case DType::bf16: return launch_backward<__nv_bfloat16>(y, dy, dx, stream);
    default: fail_expected("softmax_backward", "y.dtype", "f32, f16 or bf16", y.dtype());
  }
}

}  // namespace ignis::cuda
