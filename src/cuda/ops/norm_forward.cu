// RMSNorm and LayerNorm forward over rows.
//
// Forward: a row is owned by one warp (short rows, 4 rows per block) or by one block (long rows).
// Each thread loads its part of the row once, up to kForwardPacks 16-byte packs kept raw in
// registers (32 registers whatever the dtype, so a 64-thread block holds a 4096-element bf16
// row and many blocks share an SM: their loads cover each other's reductions); the statistics
// are fp32 reductions over those registers with one exchange between warps (one barrier) a row:
// LayerNorm takes each warp's mean and then its squared deviations from it (two shuffle
// reductions), and merges the warps' (count, mean, squared deviations) by Chan's formula, so a
// large common offset does not cancel; the normalised row is written once.
// x and weight are read once per row (weight from L1/L2 after the first row), y written once;
// block rows of up to 8 KB load x and store y with evict-first hints (see forward).
// Rows that are too long for registers, or whose length/alignment rules out 16-byte packs, take
// a looping kernel that reads the row twice (statistics, then the write; the second from L2).
#include <algorithm>
#include <climits>
#include <cstring>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/row_cache.cuh"
#include "cuda/ops/norm.h"
#include "cuda/ops/norm_common.cuh"

namespace ignis::cuda {
namespace {

using namespace norm;

constexpr int kWarpRowThreads = 128;  // forward: 4 warps, one row each
constexpr int kForwardPacks = 4;  // most 16-byte packs of a row one thread keeps, forward
constexpr long long kStreamingRowBytes = 8192;  // block rows this long or shorter stream (see forward)

// The threads that own one row in the forward: a warp (kWarp) or the whole block. Pack k of a
// thread starts at column (rank + k * size) * V in every row, so a thread's columns never change.
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
  // The group's sum of per-warp values (the same in every lane of a warp) in every thread;
  // scratch: this reduction's buffer (see sum_over_warps).
  template <class S>
  __device__ static S sum_warps(S v, S* scratch) {
    if constexpr (kWarp) return v;
    else return sum_over_warps(v, scratch);
  }
};

// Loads the packs of one row at columns column(k), zeros past dim; `streaming`: evict-first loads
// (the row is read once).
// in: [dim], one row.
template <class T, int V, int K, class Column>
__device__ __forceinline__ void load_row(const T* in, int dim, Column column, bool streaming, Pack<T, V> (&p)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = column(k);
    if (c < dim) {
      if (streaming) {
        const uint4 word = __ldcs(reinterpret_cast<const uint4*>(in + c));
        memcpy(&p[k], &word, sizeof(word));
      } else {
        p[k] = *reinterpret_cast<const Pack<T, V>*>(in + c);
      }
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) p[k].v[j] = from_float<T>(0.0f);
    }
  }
}

// Statistics of a row held in registers, the same bits in every thread of the group: each warp
// reduces its own columns first (RMSNorm: sum x^2; LayerNorm: two passes over the registers, the
// warp's mean, then its sum of squared deviations from it: no barrier, and no cancellation of a
// common offset), then one exchange between the warps (LayerNorm: Chan's merge of the warps'
// Moments). Packs at or past dim are padding. scratch: this row's buffer (see sum_over_warps).
template <Kind kKind, class G, class T, int K, int V>
__device__ RowStats register_stats(const Pack<T, V> (&p)[K], int dim, float eps, Partial<kKind>* scratch) {
  float2 s = {0.0f, 0.0f};  // (sum x or x^2, count)
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (G::template column<V>(k) >= dim) continue;
    s.y += static_cast<float>(V);
    float v[V];
    to_floats(p[k], v);
#pragma unroll
    for (int j = 0; j < V; ++j) s.x += kKind == Kind::layer ? v[j] : v[j] * v[j];
  }
  if constexpr (kKind == Kind::rms) {
    return row_stats<kKind>(G::sum_warps(warp_sum(s.x), scratch), dim, eps);
  } else {
    s = warp_sum(s);
    const float mean = s.x / fmaxf(s.y, 1.0f);  // a warp of padding only: the empty Moments
    float m2 = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (G::template column<V>(k) >= dim) continue;
      float v[V];
      to_floats(p[k], v);
#pragma unroll
      for (int j = 0; j < V; ++j) m2 += (v[j] - mean) * (v[j] - mean);
    }
    return row_stats<kKind>(G::sum_warps(Moments{s.y, mean, warp_sum(m2)}, scratch), dim, eps);
  }
}

// y = (v - mean) * rstd * weight (+ bias) for one pack at column c, written to out + c;
// `streaming`: an evict-first store (y is not read again by this kernel).
// weight, bias: [dim] (bias unused for RMSNorm); out: [dim], one row.
template <Kind kKind, class T, int V>
__device__ __forceinline__ void write_normalized(float (&v)[V], RowStats s, const T* weight, const T* bias, T* out,
                                                 int c, bool streaming = false) {
  float w[V], b[V];
  load_floats<T, V>(weight + c, w);
  if constexpr (kKind == Kind::layer) load_floats<T, V>(bias + c, b);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if constexpr (kKind == Kind::layer) v[j] = (v[j] - s.mean) * s.rstd * w[j] + b[j];
    else v[j] = v[j] * s.rstd * w[j];  // no fma with a zero bias
  }
  store_pack(reinterpret_cast<Pack<T, V>*>(out + c), v, streaming);
}

// The rows of a register-cached forward (forward_regs and forward_regs_two_an_sm).
// x, y: [rows, dim]; weight, bias: [dim] (bias null for RMSNorm).
template <Kind kKind, class T, int V, int K, bool kWarp>
__device__ __forceinline__ void forward_rows(const T* __restrict__ x, const T* __restrict__ weight,
                                             const T* __restrict__ bias, T* __restrict__ y, long long rows, int dim,
                                             float eps, bool streaming) {
  using G = RowGroup<kWarp>;
  __shared__ Partial<kKind> scratch[2][32];  // alternated between rows (see sum_over_warps)
  int parity = 0;
  for (long long row = G::first_row(); row < rows; row += G::row_stride(), parity ^= 1) {
    Pack<T, V> p[K];
    load_row<T, V, K>(x + row * dim, dim, [](int k) { return G::template column<V>(k); }, streaming, p);
    const RowStats s = register_stats<kKind, G>(p, dim, eps, scratch[parity]);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = G::template column<V>(k);
      if (c >= dim) continue;
      float v[V];
      to_floats(p[k], v);
      write_normalized<kKind, T, V>(v, s, weight, bias, y + row * dim, c, streaming);
    }
  }
}

// x, y: [rows, dim]; weight, bias: [dim] (bias null for RMSNorm).
template <Kind kKind, class T, int V, int K, bool kWarp>
__global__ void __launch_bounds__(kWarp ? kWarpRowThreads : 1024)
    forward_regs(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                 T* __restrict__ y, long long rows, int dim, float eps, bool streaming) {
  forward_rows<kKind, T, V, K, kWarp>(x, weight, bias, y, rows, dim, eps, streaming);
}

// 1024-thread blocks whose registers leave room for two an SM (see forward). A kernel of its own:
// a second __launch_bounds__ argument, even 1, changes the other instances' register allocation.
// x, y: [rows, dim]; weight, bias: [dim] (bias null for RMSNorm).
template <Kind kKind, class T, int V, int K>
__global__ void __launch_bounds__(1024, 2)
    forward_regs_two_an_sm(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                           T* __restrict__ y, long long rows, int dim, float eps, bool streaming) {
  forward_rows<kKind, T, V, K, false>(x, weight, bias, y, rows, dim, eps, streaming);
}

// streaming: ignored (this kernel reads each row twice, the second time from L2).
// x, y: [rows, dim]; weight, bias: [dim] (bias null for RMSNorm).
template <Kind kKind, class T, int V>
__global__ void __launch_bounds__(1024) forward_loop(const T* __restrict__ x, const T* __restrict__ weight,
                                                     const T* __restrict__ bias, T* __restrict__ y, long long rows,
                                                     int dim, float eps, [[maybe_unused]] bool streaming) {
  __shared__ Partial<kKind> scratch[2][32];  // alternated between rows (see sum_over_warps)
  const int step = blockDim.x * V;
  int parity = 0;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
    const T* in = x + row * dim;
    const RowStats s = looped_stats<kKind, T, V>(in, dim, eps, scratch[parity]);
    for (int c = threadIdx.x * V; c < dim; c += step) {
      float v[V];
      load_floats<T, V>(in + c, v);
      write_normalized<kKind, T, V>(v, s, weight, bias, y + row * dim, c);
    }
  }
}

int pow2_at_least(long long n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Forward: `warp` rows (a warp each, kWarpRowThreads per block) or a block of `threads` per
// row; `k` packs per thread, or 0 when the row does not fit kForwardPacks packs a thread.
struct ForwardPlan {
  bool warp;
  int threads;
  int k;
};

// The fewest threads that hold the row at kForwardPacks packs each (at least 64 for a block).
ForwardPlan plan_forward(long long dim, int v) {
  const long long packs = dim / v;
  if (packs <= 32LL * kForwardPacks) return {true, kWarpRowThreads, pow2_at_least((packs + 31) / 32)};
  const long long threads = std::max(64, pow2_at_least((packs + kForwardPacks - 1) / kForwardPacks));
  if (threads > 1024) return {false, 1024, 0};
  return {false, static_cast<int>(threads), pow2_at_least((packs + threads - 1) / threads)};
}

// Calls make(integral_constant<int, K>) for the runtime k in {1, 2, 4, 8} allowed by kMax;
// nullptr when k has no kernel.
template <int kMax, class Make>
auto with_k(int k, Make make) -> decltype(make(std::integral_constant<int, 1>{})) {
  switch (k) {
    case 1: return make(std::integral_constant<int, 1>{});
    case 2:
      if constexpr (2 <= kMax) return make(std::integral_constant<int, 2>{});
      break;
    case 4:
      if constexpr (4 <= kMax) return make(std::integral_constant<int, 4>{});
      break;
    case 8:
      if constexpr (8 <= kMax) return make(std::integral_constant<int, 8>{});
      break;
  }
  return nullptr;
}

template <class T>
using ForwardKernel = void (*)(const T*, const T*, const T*, T*, long long, int, float, bool);

// x, y: [rows, dim]; weight, *bias: [dim] (bias null for RMSNorm).
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

  ForwardKernel<T> kernel = &forward_loop<kKind, T, 1>;
  int threads = loop_threads(dim, 1);
  long long rows_per_block = 1;
  bool streaming = false;
  if (pack_width<T>(dim, {xp, wp, bp, yp}) == V) {
    const ForwardPlan plan = plan_forward(dim, V);
    kernel = with_k<kForwardPacks>(plan.k, [&](auto kc) -> ForwardKernel<T> {
      constexpr int K = decltype(kc)::value;
      if constexpr (sizeof(T) == 4 && K == kForwardPacks) {
        // f32 rows of 1024-thread blocks (8193-16384 columns) fit two blocks an SM in 32
        // registers a thread, so one block's loads cover the other's reductions: LayerNorm f32
        // 16384 took 37 registers and one block an SM before: 75 -> 94% of copy on the H200, 94 ->
        // 97% on the H100 (PERF_NOTES session 13). The 16-bit ones would spill there.
        if (!plan.warp && plan.threads == 1024) return &forward_regs_two_an_sm<kKind, T, V, K>;
      }
      return plan.warp ? &forward_regs<kKind, T, V, K, true> : &forward_regs<kKind, T, V, K, false>;
    });
    threads = plan.threads;
    rows_per_block = plan.warp ? plan.threads / 32 : 1;
    // Evict-first loads and stores for block rows of up to 8 KB: 4096 bf16 columns went from 78-79
    // to 83% of copy (LayerNorm) and 80 to 83-84% (RMSNorm), while rows of 16-64 KB lost 0-3 points
    // (H100, PERF_NOTES session 10). The other block rows of up to 8 KB (bf16 1032-4088, f32
    // 516-2048 columns) follow bf16 4096 unmeasured; warp rows keep plain accesses.
    streaming = !plan.warp && dim * static_cast<long long>(sizeof(T)) <= kStreamingRowBytes;
    if (kernel == nullptr) kernel = &forward_loop<kKind, T, V>;
  }
  kernel<<<grid_for((rows + rows_per_block - 1) / rows_per_block), threads, 0, to_cuda(stream)>>>(
      xp, wp, bp, yp, rows, static_cast<int>(dim), eps, streaming);
  IGNIS_CHECK_LAUNCH();
}

// x, y: [rows, dim]; weight, *bias: [dim] (bias null for RMSNorm).
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

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y, float eps, Stream stream) {
  forward_any<Kind::rms>("rmsnorm_forward", x, weight, nullptr, y, eps, stream);
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, float eps,
                       Stream stream) {
  forward_any<Kind::layer>("layernorm_forward", x, weight, &bias, y, eps, stream);
}

}  // namespace ignis::cuda
