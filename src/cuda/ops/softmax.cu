// Softmax over rows. Rows that fit on chip (32768 elements a block, up to 8 blocks of a cluster on
// sm_90) are read once into registers, reduced, and written from there: one read and one write.
// Longer rows (or pre-sm_90 devices for rows past one block) use the streaming kernels: one
// block per row, any length, reading the row twice (statistics pass, then the output pass).
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/row_cache.cuh"
#include "cuda/ops/softmax.h"

namespace ignis::cuda {
namespace {

// One row per cluster of `cluster` blocks; each block holds its slice in registers.
template <class T, int V, int P>
__global__ void __launch_bounds__(kRowThreads)
    softmax_cached_kernel(const T* __restrict__ x, T* __restrict__ y, long long cols, int cluster) {
  __shared__ SoftmaxState scratch[32];
  __shared__ SoftmaxState slot;
  const long long row = blockIdx.x / cluster;
  const long long first = static_cast<long long>(blockIdx.x % cluster) * blockDim.x * P;
  const auto* in = reinterpret_cast<const Pack<T, V>*>(x + row * cols);
  auto* out = reinterpret_cast<Pack<T, V>*>(y + row * cols);

  Pack<T, V> held[P];
  const int count = load_held<T, V, P>(in, first, cols / V, held, -INFINITY);
  const SoftmaxState state = row_softmax_state<T, V, P>(held, -INFINITY, cluster, scratch, &slot);
  // A row of all -inf has no visible element: it outputs zeros rather than 0/0.
  const float inv_sum = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;
  const float row_max = state.max == -INFINITY ? 0.0f : state.max;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k < count) {
      float v[V];
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = expf(to_float(held[k].v[i]) - row_max) * inv_sum;
      store_floats<T, V>(reinterpret_cast<T*>(out + held_index(first, k)), v);
    }
  }
}

template <class T, int V, int P>
__global__ void __launch_bounds__(kRowThreads)
    softmax_backward_cached_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                   long long cols, int cluster) {
  __shared__ float scratch[32];
  __shared__ float slot;
  const long long row = blockIdx.x / cluster;
  const long long first = static_cast<long long>(blockIdx.x % cluster) * blockDim.x * P;
  const long long packs = cols / V;
  Pack<T, V> yh[P], gh[P];
  const int count = load_held<T, V, P>(reinterpret_cast<const Pack<T, V>*>(y + row * cols), first, packs, yh, 0.0f);
  load_held<T, V, P>(reinterpret_cast<const Pack<T, V>*>(dy + row * cols), first, packs, gh, 0.0f);
  float dot = 0.0f;
#pragma unroll
  for (int k = 0; k < P; ++k)
#pragma unroll
    for (int i = 0; i < V; ++i) dot += to_float(yh[k].v[i]) * to_float(gh[k].v[i]);
  dot = block_reduce(dot, Sum{}, scratch);
  if (cluster > 1) dot = cluster_reduce(dot, Sum{}, &slot);

  auto* out = reinterpret_cast<Pack<T, V>*>(dx + row * cols);
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k < count) {
      float v[V];
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = to_float(yh[k].v[i]) * (to_float(gh[k].v[i]) - dot);
      store_floats<T, V>(reinterpret_cast<T*>(out + held_index(first, k)), v);
    }
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

// Packs a thread may hold: 32 elements forward, 16 each of y and dy backward. More and the
// compiler, which unpacks 16-bit packs into one register an element, spills past 64 registers.
constexpr int max_packs_per_thread(int v, int elements) { return v == 1 ? elements / 4 : elements / v; }

// Launches the cached forward kernel when the row fits; false leaves the row to the streaming one.
template <class T, int V>
bool try_cached_forward(const T* in, T* out, long long rows, long long cols, Stream stream) {
  constexpr int kMax = max_packs_per_thread(V, 32);
  const RowPlan plan = plan_rows(rows, cols / V, kMax, device_has_clusters());
  const auto go = [&](auto kernel) { return launch_rows(kernel, plan, rows, stream, in, out, cols, plan.cluster); };
  if (plan.packs_per_thread == kMax) return go(softmax_cached_kernel<T, V, kMax>);
  if (plan.packs_per_thread == 4) return go(softmax_cached_kernel<T, V, 4>);
  if (plan.packs_per_thread == 1) return go(softmax_cached_kernel<T, V, 1>);
  return false;
}

template <class T, int V>
bool try_cached_backward(const T* yp, const T* gp, T* out, long long rows, long long cols, Stream stream) {
  constexpr int kMax = max_packs_per_thread(V, 16);
  const RowPlan plan = plan_rows(rows, cols / V, kMax, device_has_clusters());
  const auto go = [&](auto kernel) { return launch_rows(kernel, plan, rows, stream, yp, gp, out, cols, plan.cluster); };
  if (plan.packs_per_thread == kMax) return go(softmax_backward_cached_kernel<T, V, kMax>);
  if (plan.packs_per_thread == 1) return go(softmax_backward_cached_kernel<T, V, 1>);
  return false;
}

template <class T>
void launch_forward(const Tensor& x, const Tensor& y, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = x.size(0), cols = x.size(1);
  if (rows == 0 || cols == 0) return;
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  const bool vectorized = cols % V == 0 && pack_aligned<T, V>(in) && pack_aligned<T, V>(out);
  if (vectorized ? try_cached_forward<T, V>(in, out, rows, cols, stream)
                 : try_cached_forward<T, 1>(in, out, rows, cols, stream))
    return;
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
  if (vectorized ? try_cached_backward<T, V>(yp, gp, out, rows, cols, stream)
                 : try_cached_backward<T, 1>(yp, gp, out, rows, cols, stream))
    return;
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
