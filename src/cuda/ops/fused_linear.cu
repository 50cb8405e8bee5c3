// Fused matrix-vector products for decoding. The cost is reading the weights once, so:
// - one warp per output row and 4 warps per block, so even out = 576 gives 144 blocks to spread
//   over the SMs; past sm_count * 8 blocks each block loops over row groups (the grid depends
//   only on the shapes and the device, so a CUDA graph can replay it);
// - each lane loads 16-byte packs (8 bf16 or 4 f32), kUnroll of them issued before the FMAs, so
//   a warp keeps 32 * kUnroll * 16 bytes in flight per row;
// - the block stages its rows of x in shared memory as f32, normalised there when the op starts
//   with an RMSNorm (every block recomputes the few row norms: in floats each, nothing next to
//   the weights), and every warp reads it from there;
// - NR rows of x (up to 8) are multiplied against each weight pack while it is in registers, so
//   a few tokens cost the same weight traffic as one; more rows use more row groups (grid.y).
// Rows of w that are not 16-byte aligned (in not a multiple of the pack, or an odd base) take a
// scalar kernel with the same structure. An x row longer than the shared tile (44 KiB over NR
// rows) is staged tile by tile.
#include <algorithm>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/ops/fused_linear.h"

namespace ignis::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 4;
// 44 KiB: static plus dynamic shared memory above 48 KiB would need an opt-in per kernel.
constexpr int kSmemFloats = 11264;
constexpr int kBlocksPerSm = 8;

struct Params {
  const void* x;
  const float* norm_weight;
  const void* w;
  const void* w_up;
  void* y;
  int n, in, out;
  int tile;  // x elements staged per pass, a multiple of 8
  float eps;
  bool x_bf16, y_bf16, accumulate;
};

__device__ __forceinline__ float load_x(const void* x, bool bf16, long long i) {
  return bf16 ? to_float(static_cast<const __nv_bfloat16*>(x)[i]) : static_cast<const float*>(x)[i];
}

// Adds row r's share of one pack: acc[r] += sum_v wv[v] * x[v] for the V staged x values at xr.
template <int V>
__device__ __forceinline__ float dot_pack(const float (&wv)[V], const float* xr, float acc) {
  static_assert(V % 4 == 0, "packs are whole float4s of x");
#pragma unroll
  for (int v = 0; v < V; v += 4) {
    const float4 xv = *reinterpret_cast<const float4*>(xr + v);
    acc = fmaf(wv[v], xv.x, acc);
    acc = fmaf(wv[v + 1], xv.y, acc);
    acc = fmaf(wv[v + 2], xv.z, acc);
    acc = fmaf(wv[v + 3], xv.w, acc);
  }
  return acc;
}

// One warp's partial dot products of weight row `wr` (and `ur` for the up projection) with the
// nr staged rows over a tile of kt elements. Lane L takes packs L, L + 32, ...
template <class W, int NR, bool kVec, bool kGlu>
__device__ __forceinline__ void dot_tile(const W* __restrict__ wr, const W* __restrict__ ur, const float* xs,
                                         int tile, int kt, int nr, float (&acc)[NR], float (&acc_up)[NR]) {
  const int lane = threadIdx.x % 32;
  if constexpr (kVec) {
    constexpr int V = 16 / static_cast<int>(sizeof(W));
    const int packs = kt / V;  // kVec: kt is a multiple of V
    for (int c0 = lane; c0 < packs; c0 += 32 * kUnroll) {
      float wv[kUnroll][V];
      float uv[kUnroll][V];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        if (c < packs) {
          load_floats<W, V>(wr + c * V, wv[u]);
          if constexpr (kGlu) load_floats<W, V>(ur + c * V, uv[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        if (c >= packs) break;
#pragma unroll
        for (int r = 0; r < NR; ++r) {
          if (r < nr) {
            const float* xr = xs + r * tile + c * V;
            acc[r] = dot_pack<V>(wv[u], xr, acc[r]);
            if constexpr (kGlu) acc_up[r] = dot_pack<V>(uv[u], xr, acc_up[r]);
          }
        }
      }
    }
  } else {
    for (int k0 = lane; k0 < kt; k0 += 32 * kUnroll) {
      float wv[kUnroll];
      float uv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int k = k0 + 32 * u;
        if (k < kt) {
          wv[u] = to_float(wr[k]);
          if constexpr (kGlu) uv[u] = to_float(ur[k]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int k = k0 + 32 * u;
        if (k >= kt) break;
#pragma unroll
        for (int r = 0; r < NR; ++r) {
          if (r < nr) {
            acc[r] = fmaf(wv[u], xs[r * tile + k], acc[r]);
            if constexpr (kGlu) acc_up[r] = fmaf(uv[u], xs[r * tile + k], acc_up[r]);
          }
        }
      }
    }
  }
}

// grid.x: row groups of kWarps output rows (strided when there are more than blocks);
// grid.y: groups of NR rows of x. Dynamic shared memory: NR * tile floats.
template <class W, int NR, bool kVec, bool kGlu>
__global__ void __launch_bounds__(kThreads) matvec_kernel(Params p) {
  extern __shared__ float4 smem[];
  float* xs = reinterpret_cast<float*>(smem);  // [NR][tile]
  __shared__ float inv_rms[NR];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = static_cast<int>(blockIdx.y) * NR;
  const int nr = min(NR, p.n - r0);
  const W* w = static_cast<const W*>(p.w);
  const W* w_up = static_cast<const W*>(p.w_up);

  // The weights are constant: their first rows head for L2 while the kernel before still runs.
  pdl_trigger();
  {
    const int first = static_cast<int>(blockIdx.x) * kWarps + warp;
    if (blockIdx.y == 0 && first < p.out) {
      const long long bytes = static_cast<long long>(p.in) * sizeof(W);
      prefetch_l2(w + static_cast<long long>(first) * p.in, bytes, lane);
      if constexpr (kGlu) prefetch_l2(w_up + static_cast<long long>(first) * p.in, bytes, lane);
    }
  }
  pdl_wait();  // x (and y, when accumulating) come from the kernels before

  if (p.norm_weight != nullptr) {
    for (int r = warp; r < nr; r += kWarps) {
      const long long base = static_cast<long long>(r0 + r) * p.in;
      float sq = 0.0f;
      for (int k = lane; k < p.in; k += 32) {
        const float v = load_x(p.x, p.x_bf16, base + k);
        sq = fmaf(v, v, sq);
      }
      sq = warp_reduce(sq, Sum{});
      if (lane == 0) inv_rms[r] = 1.0f / sqrtf(sq / static_cast<float>(p.in) + p.eps);
    }
    // The __syncthreads before the first staging publishes inv_rms.
  }

  const int groups = (p.out + kWarps - 1) / kWarps;
  const bool one_tile = p.in <= p.tile;
  bool staged = false;
  // Every thread of the block runs the same iterations of both loops: the barriers are uniform.
  for (int g = static_cast<int>(blockIdx.x); g < groups; g += static_cast<int>(gridDim.x)) {
    const int row = g * kWarps + warp;
    const bool active = row < p.out;
    float acc[NR], acc_up[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[r] = acc_up[r] = 0.0f;
    for (int k0 = 0; k0 < p.in; k0 += p.tile) {
      const int kt = min(p.tile, p.in - k0);
      if (!staged) {
        __syncthreads();  // the previous tile has been read by every warp
        for (int i = static_cast<int>(threadIdx.x); i < nr * kt; i += kThreads) {
          const int r = i / kt, k = i - r * kt;
          float v = load_x(p.x, p.x_bf16, static_cast<long long>(r0 + r) * p.in + k0 + k);
          if (p.norm_weight != nullptr) v = v * inv_rms[r] * p.norm_weight[k0 + k];
          xs[r * p.tile + k] = v;
        }
        __syncthreads();
        staged = one_tile;
      }
      if (active) {
        const long long at = static_cast<long long>(row) * p.in + k0;
        dot_tile<W, NR, kVec, kGlu>(w + at, kGlu ? w_up + at : nullptr, xs, p.tile, kt, nr, acc, acc_up);
      }
    }
    if (!active) continue;
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      acc[r] = warp_reduce(acc[r], Sum{});
      if constexpr (kGlu) acc_up[r] = warp_reduce(acc_up[r], Sum{});
    }
    if (lane != 0) continue;
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      if (r >= nr) break;
      const long long at = static_cast<long long>(r0 + r) * p.out + row;
      float v = acc[r];
      if constexpr (kGlu) v = acc[r] / (1.0f + expf(-acc[r])) * acc_up[r];
      if (p.y_bf16) {
        static_cast<__nv_bfloat16*>(p.y)[at] = from_float<__nv_bfloat16>(v);
      } else {
        float* y = static_cast<float*>(p.y);
        y[at] = p.accumulate ? y[at] + v : v;
      }
    }
  }
}

template <class W, int NR, bool kVec, bool kGlu>
void launch(Params p, Stream stream) {
  p.tile = std::min((p.in + 7) / 8 * 8, kSmemFloats / NR / 8 * 8);
  const long long groups = (p.out + kWarps - 1) / kWarps;
  const long long blocks = std::min<long long>(groups, static_cast<long long>(sm_count()) * kBlocksPerSm);
  const dim3 grid(static_cast<unsigned>(blocks), ceil_div(p.n, NR));
  const std::size_t smem = static_cast<std::size_t>(NR) * p.tile * sizeof(float);
  launch_kernel(matvec_kernel<W, NR, kVec, kGlu>, grid, kThreads, smem, stream, p);
  IGNIS_CHECK_LAUNCH();
}

template <class W, int NR>
void launch_variant(const Params& p, bool vec, bool glu, Stream stream) {
  if (glu) return vec ? launch<W, NR, true, true>(p, stream) : launch<W, NR, false, true>(p, stream);
  return vec ? launch<W, NR, true, false>(p, stream) : launch<W, NR, false, false>(p, stream);
}

template <class W>
void launch_typed(const Params& p, bool glu, Stream stream) {
  constexpr int V = 16 / static_cast<int>(sizeof(W));
  const bool vec = p.in % V == 0 && pack_aligned<W, V>(p.w) && (!glu || pack_aligned<W, V>(p.w_up));
  if (p.n == 1) return launch_variant<W, 1>(p, vec, glu, stream);
  if (p.n == 2) return launch_variant<W, 2>(p, vec, glu, stream);
  if (p.n <= 4) return launch_variant<W, 4>(p, vec, glu, stream);
  return launch_variant<W, 8>(p, vec, glu, stream);
}

}  // namespace

void matvec(const MatvecCall& call, Stream stream) {
  if (call.n == 0 || call.out == 0) return;
  Params p{};
  p.x = call.x;
  p.norm_weight = call.norm_weight;
  p.w = call.w;
  p.w_up = call.w_up;
  p.y = call.y;
  p.n = static_cast<int>(call.n);
  p.in = static_cast<int>(call.in);
  p.out = static_cast<int>(call.out);
  p.eps = call.eps;
  p.x_bf16 = call.x_dtype == DType::bf16;
  p.y_bf16 = call.y_dtype == DType::bf16;
  p.accumulate = call.accumulate;
  const bool glu = call.w_up != nullptr;
  if (call.w_dtype == DType::bf16) return launch_typed<__nv_bfloat16>(p, glu, stream);
  return launch_typed<float>(p, glu, stream);
}

}  // namespace ignis::cuda
