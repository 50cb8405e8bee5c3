// Softmax over rows: one thread block per row, so any row length works without a shared-memory
// cap. Forward reads the row twice (an online max/sum pass, then the normalising pass) and
// writes it once; backward reads y and dy twice and writes dx once.
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/ops/softmax.h"

namespace ignis::cuda {
namespace {

// V elements per thread per step: 16-byte packs when the row allows, else 1.
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

template <class T>
void launch_forward(const Tensor& x, const Tensor& y, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = x.size(0), cols = x.size(1);
  if (rows == 0 || cols == 0) return;
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  const bool vectorized = cols % V == 0 && pack_aligned<T, V>(in) && pack_aligned<T, V>(out);
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
