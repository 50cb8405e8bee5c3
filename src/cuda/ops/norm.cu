// RMSNorm and LayerNorm over rows, forward and backward.
//
// Forward: a row is owned by one warp (short rows, 4 rows per block) or by one block (long rows).
// Each thread loads its part of the row once, in 16-byte packs, into registers; the statistics
// are fp32 group reductions over those registers (LayerNorm: the mean, then the squared
// deviations, so a large common offset does not cancel); the normalised row is written once.
// x and weight are read once per row (weight from L1/L2 after the first row), y written once.
// Rows that are too long for registers, or whose length/alignment rules out 16-byte packs, take
// a looping kernel that reads the row again for each pass (from L2 for the later passes).
//
// Backward: same row ownership; each row recomputes its statistics from x (no saved rstd), then
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight (RMSNorm: no mean(g)
// term and mean 0). dweight = sum over rows of dy * xhat and dbias = sum of dy are accumulated
// per thread in registers over every row its group owns (a thread's columns are the same in
// every row), written as one fp32 partial row per block into a [blocks, dim] workspace, and
// summed over blocks in a fixed order by a second kernel: no atomics, deterministic.
// RMSNorm is the LayerNorm computation with the mean fixed at 0 and no bias.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/ops/norm.h"

namespace ignis::cuda {
namespace {

enum class Kind { rms, layer };

constexpr int kWarpRowThreads = 128;  // 4 warps, one row each
constexpr int kForwardElems = 32;     // most row elements one thread keeps in registers, forward
// Backward keeps x, dy, dweight and dbias per element. At 16 elements and 1024 threads (rows of
// 8193..16384) ptxas spills 36-276 bytes per thread (to L1-cached local memory); longer rows
// take the looping kernel.
constexpr int kBackwardElems = 16;
constexpr int kSumSlices = 16;        // row slices of the partial-sum kernel

__device__ __forceinline__ float add(float a, float b) { return a + b; }
__device__ __forceinline__ float2 add(float2 a, float2 b) { return {a.x + b.x, a.y + b.y}; }

__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, Sum{}); }
__device__ __forceinline__ float2 warp_sum(float2 v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v.x += __shfl_xor_sync(kFullMask, v.x, offset);
    v.y += __shfl_xor_sync(kFullMask, v.y, offset);
  }
  return v;
}

// Sum over the whole block, returned to every thread. scratch: 32 values of shared memory.
template <class S>
__device__ S block_sum(S v, S* scratch) {
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by the previous reduction
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) v = add(v, scratch[w]);
  return v;
}

// The threads that own one row: a warp (kWarp) or the whole block. Pack k of a thread starts
// at column (rank + k * size) * V in every row, so a thread's columns never change.
template <bool kWarp>
struct RowGroup {
  __device__ static int size() { return kWarp ? 32 : static_cast<int>(blockDim.x); }
  __device__ static int rank() { return kWarp ? threadIdx.x % 32 : threadIdx.x; }
  __device__ static int per_block() { return kWarp ? blockDim.x / 32 : 1; }
  __device__ static long long first_row() {
    return static_cast<long long>(blockIdx.x) * per_block() + (kWarp ? threadIdx.x / 32 : 0);
  }
  __device__ static long long row_stride() { return static_cast<long long>(gridDim.x) * per_block(); }
  template <int V>
  __device__ static int column(int k) {
    return (rank() + k * size()) * V;
  }
  template <class S>
  __device__ static S sum(S v, S* scratch) {
    if constexpr (kWarp) return warp_sum(v);
    else return block_sum(v, scratch);
  }
};

struct RowStats {
  float mean;  // 0 for RMSNorm
  float rstd;
};

// Statistics of a row held in registers; columns at or past dim hold zeros.
template <Kind kKind, class G, int K, int V>
__device__ RowStats register_stats(const float (&v)[K][V], int dim, float eps, float* scratch) {
  float mean = 0.0f;
  if constexpr (kKind == Kind::layer) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) s += v[k][j];
    mean = G::sum(s, scratch) / static_cast<float>(dim);
  }
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (G::template column<V>(k) >= dim) continue;  // the zero padding is not part of the row
#pragma unroll
    for (int j = 0; j < V; ++j) sq += (v[k][j] - mean) * (v[k][j] - mean);
  }
  return {mean, rsqrtf(G::sum(sq, scratch) / static_cast<float>(dim) + eps)};
}

// Statistics of a row read from memory, one pass per reduction; a block owns the row.
template <Kind kKind, class T, int V>
__device__ RowStats looped_stats(const T* in, int dim, float eps, float* scratch) {
  const int step = blockDim.x * V;
  float mean = 0.0f;
  if constexpr (kKind == Kind::layer) {
    float s = 0.0f;
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float v[V];
      load_floats<T, V>(in + c, v);
#pragma unroll
      for (int j = 0; j < V; ++j) s += v[j];
    }
    mean = block_sum(s, scratch) / static_cast<float>(dim);
  }
  float sq = 0.0f;
  for (int c = threadIdx.x * V; c < dim; c += step) {
    float v[V];
    load_floats<T, V>(in + c, v);
#pragma unroll
    for (int j = 0; j < V; ++j) sq += (v[j] - mean) * (v[j] - mean);
  }
  return {mean, rsqrtf(block_sum(sq, scratch) / static_cast<float>(dim) + eps)};
}

// y = (v - mean) * rstd * weight (+ bias) for one pack at column c, written to out + c.
template <Kind kKind, class T, int V>
__device__ __forceinline__ void write_normalized(float (&v)[V], RowStats s, const T* weight, const T* bias, T* out,
                                                 int c) {
  float w[V], b[V] = {};
  load_floats<T, V>(weight + c, w);
  if constexpr (kKind == Kind::layer) load_floats<T, V>(bias + c, b);
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = (v[j] - s.mean) * s.rstd * w[j] + b[j];
  store_floats<T, V>(out + c, v);
}

template <Kind kKind, class T, int V, int K, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kWarpRowThreads : 1024)
    forward_regs(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                 T* __restrict__ y, long long rows, int dim, float eps) {
  using G = RowGroup<kWarp>;
  __shared__ float scratch[32];
  for (long long row = G::first_row(); row < rows; row += G::row_stride()) {
    const T* in = x + row * dim;
    float v[K][V];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = G::template column<V>(k);
      if (c < dim) {
        load_floats<T, V>(in + c, v[k]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) v[k][j] = 0.0f;
      }
    }
    const RowStats s = register_stats<kKind, G, K, V>(v, dim, eps, scratch);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = G::template column<V>(k);
      if (c < dim) write_normalized<kKind, T, V>(v[k], s, weight, bias, y + row * dim, c);
    }
  }
}

template <Kind kKind, class T, int V>
__global__ void __launch_bounds__(1024) forward_loop(const T* __restrict__ x, const T* __restrict__ weight,
                                                     const T* __restrict__ bias, T* __restrict__ y, long long rows,
                                                     int dim, float eps) {
  __shared__ float scratch[32];
  const int step = blockDim.x * V;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * dim;
    const RowStats s = looped_stats<kKind, T, V>(in, dim, eps, scratch);
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float v[V];
      load_floats<T, V>(in + c, v);
      write_normalized<kKind, T, V>(v, s, weight, bias, y + row * dim, c);
    }
  }
}

// One pack of the backward at column c: turns x into xhat and dy into g = dy * weight,
// adds dy * xhat and dy to the thread's partial sums, and returns (sum g, sum g * xhat).
template <Kind kKind, class T, int V>
__device__ __forceinline__ float2 backward_pack(float (&xv)[V], float (&gv)[V], RowStats s, const T* weight, int c,
                                                float (&dw)[V], float (&db)[V]) {
  float w[V];
  load_floats<T, V>(weight + c, w);
  float2 sums = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < V; ++j) {
    xv[j] = (xv[j] - s.mean) * s.rstd;
    dw[j] += gv[j] * xv[j];
    if constexpr (kKind == Kind::layer) db[j] += gv[j];
    gv[j] *= w[j];
    sums.x += gv[j];
    sums.y += gv[j] * xv[j];
  }
  return sums;
}

// dx for one pack from xhat and g, given the row's mean(g) and mean(g * xhat).
template <Kind kKind, class T, int V>
__device__ __forceinline__ void write_dx(const float (&xh)[V], const float (&gv)[V], RowStats s, float2 means, T* out,
                                         int c) {
  float d[V];
  const float mean_g = kKind == Kind::layer ? means.x : 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) d[j] = s.rstd * (gv[j] - mean_g - xh[j] * means.y);
  store_floats<T, V>(out + c, d);
}

template <Kind kKind, class T, int V, int K, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kWarpRowThreads : 1024)
    backward_regs(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                  T* __restrict__ dx, float* __restrict__ dw_part, float* __restrict__ db_part, long long rows,
                  int dim, float eps) {
  using G = RowGroup<kWarp>;
  __shared__ float scratch[32];
  __shared__ float2 scratch2[32];
  float dw[K][V] = {}, db[K][V] = {};
  for (long long row = G::first_row(); row < rows; row += G::row_stride()) {
    float xv[K][V], gv[K][V];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = G::template column<V>(k);
      if (c < dim) {
        load_floats<T, V>(x + row * dim + c, xv[k]);
        load_floats<T, V>(dy + row * dim + c, gv[k]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) xv[k][j] = gv[k][j] = 0.0f;
      }
    }
    const RowStats s = register_stats<kKind, G, K, V>(xv, dim, eps, scratch);
    float2 sums = {0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = G::template column<V>(k);
      if (c < dim) sums = add(sums, backward_pack<kKind, T, V>(xv[k], gv[k], s, weight, c, dw[k], db[k]));
    }
    sums = G::sum(sums, scratch2);
    const float2 means = {sums.x / static_cast<float>(dim), sums.y / static_cast<float>(dim)};
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = G::template column<V>(k);
      if (c < dim) write_dx<kKind, T, V>(xv[k], gv[k], s, means, dx + row * dim, c);
    }
  }

  float* pw = dw_part + static_cast<long long>(blockIdx.x) * dim;
  float* pb = kKind == Kind::layer ? db_part + static_cast<long long>(blockIdx.x) * dim : nullptr;
  if constexpr (kWarp) {
    // The block's warps own the same columns: add their sums in warp order in shared memory.
    __shared__ float acc_w[32 * kBackwardElems], acc_b[32 * kBackwardElems];
    const int warp = threadIdx.x / 32;
    for (int turn = 0; turn < static_cast<int>(blockDim.x / 32); ++turn) {
      if (warp == turn) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const int c = G::template column<V>(k);
          if (c >= dim) continue;
#pragma unroll
          for (int j = 0; j < V; ++j) {
            acc_w[c + j] = (turn == 0 ? 0.0f : acc_w[c + j]) + dw[k][j];
            if constexpr (kKind == Kind::layer) acc_b[c + j] = (turn == 0 ? 0.0f : acc_b[c + j]) + db[k][j];
          }
        }
      }
      __syncthreads();
    }
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
      pw[c] = acc_w[c];
      if constexpr (kKind == Kind::layer) pb[c] = acc_b[c];
    }
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = G::template column<V>(k);
      if (c >= dim) continue;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        pw[c + j] = dw[k][j];
        if constexpr (kKind == Kind::layer) pb[c + j] = db[k][j];
      }
    }
  }
}

// Rows too long for registers: three passes per row (statistics, sums, dx). The block's
// partial row lives in the workspace; each column is read and written only by its owning thread.
template <Kind kKind, class T, int V>
__global__ void __launch_bounds__(1024)
    backward_loop(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                  T* __restrict__ dx, float* __restrict__ dw_part, float* __restrict__ db_part, long long rows,
                  int dim, float eps) {
  __shared__ float scratch[32];
  __shared__ float2 scratch2[32];
  const int step = blockDim.x * V;
  float* pw = dw_part + static_cast<long long>(blockIdx.x) * dim;
  float* pb = kKind == Kind::layer ? db_part + static_cast<long long>(blockIdx.x) * dim : nullptr;
  for (int c = threadIdx.x * V; c < dim; c += step)
#pragma unroll
    for (int j = 0; j < V; ++j) {
      pw[c + j] = 0.0f;
      if constexpr (kKind == Kind::layer) pb[c + j] = 0.0f;
    }
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * dim;
    const T* gr = dy + row * dim;
    const RowStats s = looped_stats<kKind, T, V>(xr, dim, eps, scratch);
    float2 sums = {0.0f, 0.0f};
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float xv[V], gv[V], dw[V] = {}, db[V] = {};
      load_floats<T, V>(xr + c, xv);
      load_floats<T, V>(gr + c, gv);
      sums = add(sums, backward_pack<kKind, T, V>(xv, gv, s, weight, c, dw, db));
    }
    sums = block_sum(sums, scratch2);
    const float2 means = {sums.x / static_cast<float>(dim), sums.y / static_cast<float>(dim)};
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float xv[V], gv[V], dw[V] = {}, db[V] = {};
      load_floats<T, V>(xr + c, xv);
      load_floats<T, V>(gr + c, gv);
      backward_pack<kKind, T, V>(xv, gv, s, weight, c, dw, db);
      write_dx<kKind, T, V>(xv, gv, s, means, dx + row * dim, c);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        pw[c + j] += dw[j];
        if constexpr (kKind == Kind::layer) pb[c + j] += db[j];
      }
    }
  }
}

// out[c] = sum over p of part[p, c], in a fixed order. Block (32, kSumSlices): 32 columns, each
// slice sums every kSumSlices-th partial row, then slice 0 adds the slices in order.
template <class T>
__global__ void sum_partials(const float* __restrict__ part, int parts, int dim, T* __restrict__ out) {
  __shared__ float tile[kSumSlices][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < dim)
    for (int p = threadIdx.y; p < parts; p += kSumSlices) s += part[static_cast<long long>(p) * dim + c];
  tile[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= dim) return;
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kSumSlices; ++i) total += tile[i][threadIdx.x];
  out[c] = from_float<T>(total);
}

// How a row is split: `warp` rows (a warp each, kWarpRowThreads per block) or a block per row
// with `threads`; `k` packs per thread, or 0 when the row does not fit the register budget.
struct Plan {
  bool warp;
  int threads;
  int k;
};

int pow2_at_least(long long n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// elems: the register budget in row elements per thread.
Plan plan_rows(long long dim, int v, int elems) {
  const long long packs = dim / v;
  const int kmax = elems / v;
  if (packs <= 32LL * kmax) return {true, kWarpRowThreads, pow2_at_least((packs + 31) / 32)};
  // Enough threads to fill half the budget, so short-of-maximum rows keep registers free.
  int threads = 128;
  while (threads < 1024 && static_cast<long long>(threads) * std::max(1, kmax / 2) < packs) threads *= 2;
  const int k = pow2_at_least((packs + threads - 1) / threads);
  return {false, threads, k <= kmax ? k : 0};
}

// Calls make(integral_constant<int, K>) for the runtime k in {1, 2, 4, 8} allowed by the budget
// (K * V <= elems); nullptr when k has no kernel.
template <int V, int kElems, class Make>
auto with_k(int k, Make make) -> decltype(make(std::integral_constant<int, 1>{})) {
  switch (k) {
    case 1: return make(std::integral_constant<int, 1>{});
    case 2:
      if constexpr (2 * V <= kElems) return make(std::integral_constant<int, 2>{});
      break;
    case 4:
      if constexpr (4 * V <= kElems) return make(std::integral_constant<int, 4>{});
      break;
    case 8:
      if constexpr (8 * V <= kElems) return make(std::integral_constant<int, 8>{});
      break;
  }
  return nullptr;
}

// Threads for a looping kernel: a few packs each, between one warp and 1024.
int loop_threads(long long dim, int v) {
  const long long packs = (dim + v - 1) / v;
  int threads = 32;
  while (threads < 1024 && threads * 4LL < packs) threads *= 2;
  return threads;
}

unsigned grid_for(long long blocks) { return static_cast<unsigned>(std::min<long long>(blocks, INT_MAX)); }

bool all_aligned(std::initializer_list<const void*> ptrs, int bytes) {
  for (const void* p : ptrs)
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % bytes != 0) return false;
  return true;
}

// The 16-byte pack width when dim and every pointer allow it, else 1.
template <class T>
int pack_width(long long dim, std::initializer_list<const void*> ptrs) {
  constexpr int V = 16 / sizeof(T);
  return dim % V == 0 && all_aligned(ptrs, 16) ? V : 1;
}

template <class Kernel>
struct Choice {
  Kernel kernel;
  int threads;
  long long rows_per_block;
};

// The register kernel regs(warp, integral_constant<K>) when the row is packed and fits the
// budget of kElems elements per thread; else the looping kernel of the pack width.
template <class Kernel, int V, int kElems, class Regs>
Choice<Kernel> choose_kernel(long long dim, bool packed, Regs regs, Kernel packed_loop, Kernel scalar_loop) {
  if (!packed) return {scalar_loop, loop_threads(dim, 1), 1};
  const Plan plan = plan_rows(dim, V, kElems);
  const Kernel kernel = with_k<V, kElems>(plan.k, [&](auto kc) { return regs(plan.warp, kc); });
  if (kernel == nullptr) return {packed_loop, 1024, 1};
  return {kernel, plan.threads, plan.warp ? plan.threads / 32 : 1};
}

void check_dim_fits(long long dim, const char* where) {
  check_arg(dim <= INT_MAX / 2, where, "x.shape[1]", "<= 2^30 on CUDA", dim);
}

template <class T>
using ForwardKernel = void (*)(const T*, const T*, const T*, T*, long long, int, float);

template <Kind kKind, class T>
void forward(const char* where, const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& y, float eps,
             Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = x.size(0), dim = x.size(1);
  check_dim_fits(dim, where);
  if (rows == 0) return;
  const T* xp = x.data_as<const T>();
  const T* wp = weight.data_as<const T>();
  const T* bp = bias ? bias->data_as<const T>() : nullptr;
  T* yp = y.data_as<T>();

  const auto [kernel, threads, rows_per_block] = choose_kernel<ForwardKernel<T>, V, kForwardElems>(
      dim, pack_width<T>(dim, {xp, wp, bp, yp}) == V,
      [](bool warp, auto kc) -> ForwardKernel<T> {
        constexpr int K = decltype(kc)::value;
        return warp ? &forward_regs<kKind, T, V, K, true> : &forward_regs<kKind, T, V, K, false>;
      },
      &forward_loop<kKind, T, V>, &forward_loop<kKind, T, 1>);
  kernel<<<grid_for((rows + rows_per_block - 1) / rows_per_block), threads, 0, to_cuda(stream)>>>(
      xp, wp, bp, yp, rows, static_cast<int>(dim), eps);
  IGNIS_CHECK_LAUNCH();
}

template <class T>
using BackwardKernel = void (*)(const T*, const T*, const T*, T*, float*, float*, long long, int, float);

// A stream-ordered device allocation, freed in stream order once the kernels using it are queued.
class Workspace {
 public:
  Workspace(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) IGNIS_CUDA_CHECK(cudaMallocAsync(&data_, bytes, stream));
  }
  ~Workspace() {
    if (data_ != nullptr) cudaFreeAsync(data_, stream_);  // a destructor must not throw
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  float* floats() const { return static_cast<float*>(data_); }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

// Blocks that fit on the device at once: more would only add partial rows to sum.
template <class T>
long long resident_blocks(BackwardKernel<T> kernel, int threads) {
  int device = 0, sms = 0, per_sm = 0;
  IGNIS_CUDA_CHECK(cudaGetDevice(&device));
  IGNIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  IGNIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  return std::max(1LL, static_cast<long long>(sms) * per_sm);
}

template <Kind kKind, class T>
void backward(const char* where, const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
              const Tensor& dweight, const Tensor* dbias, float eps, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long rows = x.size(0), dim = x.size(1);
  check_dim_fits(dim, where);
  const T* xp = x.data_as<const T>();
  const T* wp = weight.data_as<const T>();
  const T* gp = dy.data_as<const T>();
  T* dxp = dx.data_as<T>();

  const auto [kernel, threads, rows_per_block] = choose_kernel<BackwardKernel<T>, V, kBackwardElems>(
      dim, pack_width<T>(dim, {xp, wp, gp, dxp}) == V,
      [](bool warp, auto kc) -> BackwardKernel<T> {
        constexpr int K = decltype(kc)::value;
        return warp ? &backward_regs<kKind, T, V, K, true> : &backward_regs<kKind, T, V, K, false>;
      },
      &backward_loop<kKind, T, V>, &backward_loop<kKind, T, 1>);
  const cudaStream_t s = to_cuda(stream);
  const long long blocks =
      std::min((rows + rows_per_block - 1) / rows_per_block, resident_blocks<T>(kernel, threads));
  const long long sums = kKind == Kind::layer ? 2 : 1;
  Workspace partial(static_cast<std::size_t>(sums * blocks * dim) * sizeof(float), s);
  float* dw_part = partial.floats();
  float* db_part = kKind == Kind::layer && blocks > 0 ? dw_part + blocks * dim : nullptr;
  if (blocks > 0) {
    kernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(xp, wp, gp, dxp, dw_part, db_part, rows,
                                                             static_cast<int>(dim), eps);
    IGNIS_CHECK_LAUNCH();
  }
  // With no rows the sums are empty: the kernels below write zeros.
  const dim3 sum_block(32, kSumSlices);
  sum_partials<T><<<ceil_div(dim, 32), sum_block, 0, s>>>(dw_part, static_cast<int>(blocks), static_cast<int>(dim),
                                                          dweight.data_as<T>());
  IGNIS_CHECK_LAUNCH();
  if (dbias != nullptr) {
    sum_partials<T><<<ceil_div(dim, 32), sum_block, 0, s>>>(db_part, static_cast<int>(blocks), static_cast<int>(dim),
                                                            dbias->data_as<T>());
    IGNIS_CHECK_LAUNCH();
  }
}

template <Kind kKind>
void forward_any(const char* where, const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& y,
                 float eps, Stream stream) {
  switch (x.dtype()) {
    case DType::f32: return forward<kKind, float>(where, x, weight, bias, y, eps, stream);
    case DType::f16: return forward<kKind, __half>(where, x, weight, bias, y, eps, stream);
    case DType::bf16: return forward<kKind, __nv_bfloat16>(where, x, weight, bias, y, eps, stream);
    default: fail_expected(where, "x.dtype", "f32, f16 or bf16", x.dtype());
  }
}

template <Kind kKind>
void backward_any(const char* where, const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                  const Tensor& dweight, const Tensor* dbias, float eps, Stream stream) {
  switch (x.dtype()) {
    case DType::f32: return backward<kKind, float>(where, x, weight, dy, dx, dweight, dbias, eps, stream);
    case DType::f16: return backward<kKind, __half>(where, x, weight, dy, dx, dweight, dbias, eps, stream);
    case DType::bf16: return backward<kKind, __nv_bfloat16>(where, x, weight, dy, dx, dweight, dbias, eps, stream);
    default: fail_expected(where, "x.dtype", "f32, f16 or bf16", x.dtype());
  }
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y, float eps, Stream stream) {
  forward_any<Kind::rms>("rmsnorm_forward", x, weight, nullptr, y, eps, stream);
}

void rmsnorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                      const Tensor& dweight, float eps, Stream stream) {
  backward_any<Kind::rms>("rmsnorm_backward", x, weight, dy, dx, dweight, nullptr, eps, stream);
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, float eps,
                       Stream stream) {
  forward_any<Kind::layer>("layernorm_forward", x, weight, &bias, y, eps, stream);
}

void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                        const Tensor& dweight, const Tensor& dbias, float eps, Stream stream) {
  backward_any<Kind::layer>("layernorm_backward", x, weight, dy, dx, dweight, &dbias, eps, stream);
}

}  // namespace ignis::cuda
