// Softmax over rows. Short rows of whole 16-byte packs are held in registers (softmax_short_kernel,
// softmax_backward_short_kernel).
// Longer rows of whole 16-byte packs that fit on chip (row_cache.cuh: up to ~220 KB a
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
// x, y: [rows, cols].
template <class T, int V>
__global__ void __launch_bounds__(kRowThreads)
    softmax_cached_kernel(const T* __restrict__ x, T* __restrict__ y, long long cols, int cluster) {
  using P = Pack<T, V>;
  __shared__ SoftmaxState scratch[32];
  __shared__ SoftmaxState slots[kMaxCluster];
  if (cluster > 1) cluster_arrive_started();
  const RowSlice s = row_slice(cols / V, cluster);
  P* cache = slice_cache<P>(s, 0);
  copy_slice(reinterpret_cast<const P*>(x + s.row * cols), s, cache);
  wait_copies();
  const SoftmaxState state = row_softmax_state<T, V>(cache, s, -INFINITY, cluster, scratch, slots);
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

// y, dy, dx: [rows, cols], a row a cluster as in the forward.
template <class T, int V>
__global__ void __launch_bounds__(kRowThreads)
    softmax_backward_cached_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                   long long cols, int cluster) {
  using P = Pack<T, V>;
  __shared__ float scratch[32];
  __shared__ float slots[kMaxCluster];
  if (cluster > 1) cluster_arrive_started();
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
  dot = row_reduce(dot, Sum{}, 0.0f, cluster, scratch, slots);

  P* out = reinterpret_cast<P*>(dx + s.row * cols);
  for (long long k = threadIdx.x; k < count; k += blockDim.x) {
    const P a = yc[k], b = gc[k];
    float v[V];
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = to_float(a.v[i]) * (to_float(b.v[i]) - dot);
    store_pack(out + s.first + k, v);
  }
}

// Short rows (at most kShortThreads * kShortPacks packs: bf16/f16 <= 4096 columns, f32 <= 2048)
// live in registers: one row a block of <= 128 threads, each thread loading its kShortPacks packs
// (t, t + blockDim.x, ...) before any use, then the row max (one barrier), exp(x - max) kept in
// registers with one exp an element, the sum (one more barrier), and the scaled output. The cached
// kernel's 64-thread blocks and 8 KB slices put ~27 bf16 4096-column rows on an SM, so 4096 rows
// were about one wave of loads then one of stores, and it spent two exps an element.
constexpr int kShortThreads = 128;
constexpr int kShortPacks = 4;

// x, y: [rows, packs * V], a row a block.
template <class T, int V>
__global__ void __launch_bounds__(kShortThreads)
    softmax_short_kernel(const T* __restrict__ x, T* __restrict__ y, long long packs) {
  using P = Pack<T, V>;
  __shared__ float max_scratch[32];
  __shared__ float sum_scratch[32];
  const P* in = reinterpret_cast<const P*>(x) + blockIdx.x * packs;
  P* out = reinterpret_cast<P*>(y) + blockIdx.x * packs;
  P raw[kShortPacks];
#pragma unroll
  for (int j = 0; j < kShortPacks; ++j) {
    const long long k = threadIdx.x + static_cast<long long>(j) * blockDim.x;
    if (k < packs) raw[j] = in[k];
  }
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < kShortPacks; ++j)
    if (threadIdx.x + static_cast<long long>(j) * blockDim.x < packs) m = fmaxf(m, pack_max(raw[j]));
  m = row_reduce(m, Max{}, -INFINITY, 1, max_scratch, static_cast<float*>(nullptr));
  // A row of all -inf has no visible element: exp(-inf - 0) = 0 everywhere, sum 0, output zeros.
  const float row_max = m == -INFINITY ? 0.0f : m;
  float e[kShortPacks][V];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kShortPacks; ++j) {
    const bool loaded = threadIdx.x + static_cast<long long>(j) * blockDim.x < packs;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      e[j][i] = loaded ? exp_minus(to_float(raw[j].v[i]), row_max) : 0.0f;
      sum += e[j][i];
    }
  }
  sum = row_reduce(sum, Sum{}, 0.0f, 1, sum_scratch, static_cast<float*>(nullptr));
  const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
  for (int j = 0; j < kShortPacks; ++j) {
    const long long k = threadIdx.x + static_cast<long long>(j) * blockDim.x;
    if (k < packs) {
#pragma unroll
      for (int i = 0; i < V; ++i) e[j][i] *= inv_sum;
      store_pack(out + k, e[j]);
    }
  }
}

// Backward of short rows, the same shape: y and dy packs loaded first, dot = sum(y dy) (one
// barrier), dx = y (dy - dot) from registers.
// y, dy, dx: [rows, packs * V].
template <class T, int V>
__global__ void __launch_bounds__(kShortThreads)
    softmax_backward_short_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                  long long packs) {
  using P = Pack<T, V>;
  __shared__ float scratch[32];
  const long long row = blockIdx.x * packs;
  const P* yp = reinterpret_cast<const P*>(y) + row;
  const P* gp = reinterpret_cast<const P*>(dy) + row;
  P* out = reinterpret_cast<P*>(dx) + row;
  P a[kShortPacks], b[kShortPacks];
#pragma unroll
  for (int j = 0; j < kShortPacks; ++j) {
    const long long k = threadIdx.x + static_cast<long long>(j) * blockDim.x;
    if (k < packs) {
      a[j] = yp[k];
      b[j] = gp[k];
    }
  }
  float dot = 0.0f;
#pragma unroll
  for (int j = 0; j < kShortPacks; ++j)
    if (threadIdx.x + static_cast<long long>(j) * blockDim.x < packs)
#pragma unroll
      for (int i = 0; i < V; ++i) dot += to_float(a[j].v[i]) * to_float(b[j].v[i]);
  dot = row_reduce(dot, Sum{}, 0.0f, 1, scratch, static_cast<float*>(nullptr));
#pragma unroll
  for (int j = 0; j < kShortPacks; ++j) {
    const long long k = threadIdx.x + static_cast<long long>(j) * blockDim.x;
    if (k < packs) {
      float v[V];
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = to_float(a[j].v[i]) * (to_float(b[j].v[i]) - dot);
      store_pack(out + k, v);
    }
  }
}

// Threads for a short row: the fewest warps that hold it at kShortPacks packs a thread.
unsigned short_threads(long long packs) {
  return static_cast<unsigned>(((packs + kShortPacks - 1) / kShortPacks + 31) / 32 * 32);
}

bool short_rows(long long rows, long long packs) {
  return packs <= kShortThreads * kShortPacks && rows <= 0x7fffffffLL;
}

// Streaming kernels. V elements per thread per step: 16-byte packs when the row allows, else 1.
// x, y: [rows, cols], a row a block.
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

// y, dy, dx: [rows, cols], a row a block.
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
// in, out: [rows, cols].
template <class T, int V>
bool try_cached_forward(const T* in, T* out, long long rows, long long cols, Stream stream) {
  constexpr auto kernel = softmax_cached_kernel<T, V>;
  RowPlan plan = plan_rows(rows, cols / V, 1);
  if constexpr (sizeof(T) == 2) plan = resident_plan(plan, kernel);  // row_residency.h: 16-bit rows only
  return plan.cluster > 0 && launch_rows(kernel, plan, rows, stream, in, out, cols, plan.cluster);
}

// yp (y), gp (dy), out (dx): [rows, cols].
template <class T, int V>
bool try_cached_backward(const T* yp, const T* gp, T* out, long long rows, long long cols, Stream stream) {
  const RowPlan plan = plan_rows(rows, cols / V, 2);
  return plan.cluster > 0 &&
         launch_rows(softmax_backward_cached_kernel<T, V>, plan, rows, stream, yp, gp, out, cols, plan.cluster);
}

// x, y: [rows, cols].
template <class T>
void launch_forward(const Tensor& x, const Tensor& y, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = x.size(0), cols = x.size(1);
  if (rows == 0 || cols == 0) return;
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  const bool vectorized = cols % V == 0 && pack_aligned<T, V>(in) && pack_aligned<T, V>(out);
  const long long packs = cols / V;
  if (vectorized && short_rows(rows, packs)) {
    softmax_short_kernel<T, V><<<static_cast<unsigned>(rows), short_threads(packs), 0, to_cuda(stream)>>>(in, out,
                                                                                                         packs);
    IGNIS_CHECK_LAUNCH();
    return;
  }
  if (vectorized && try_cached_forward<T, V>(in, out, rows, cols, stream)) return;
  const int threads = threads_for(cols, vectorized ? V : 1);
  if (vectorized)
    softmax_forward_kernel<T, V><<<rows, threads, 0, to_cuda(stream)>>>(in, out, cols);
  else
    softmax_forward_kernel<T, 1><<<rows, threads, 0, to_cuda(stream)>>>(in, out, cols);
  IGNIS_CHECK_LAUNCH();
}

// y, dy, dx: [rows, cols].
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
  const long long packs = cols / V;
  if (vectorized && short_rows(rows, packs)) {
    softmax_backward_short_kernel<T, V><<<static_cast<unsigned>(rows), short_threads(packs), 0, to_cuda(stream)>>>(
        yp, gp, out, packs);
    IGNIS_CHECK_LAUNCH();
    return;
  }
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
