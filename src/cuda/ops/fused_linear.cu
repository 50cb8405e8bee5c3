// Fused matrix-vector products for decoding. The cost is reading the weights once, so the kernel
// keeps as many weight bytes in flight as it can and waits on memory once per call, not per row:
// - a warp owns ROWS consecutive output rows, 32 / ROWS lanes per row, so a row's share of a lane
//   is ROWS times longer and its sum takes log2(32 / ROWS) shuffles (all rows of the warp in the
//   same shuffles); 4 warps a block. ROWS = 4 only when even then there are more row groups than
//   resident blocks (the LM head); smaller matrices keep one row a warp, which spreads them over
//   the most SMs (out = 576 gives 144 blocks);
// - the grid is the resident blocks at most (it depends only on the shapes and the device, so a
//   CUDA graph can replay it); each block walks its row groups, tiles and load batches as one
//   stream of items, a batch being kUnroll 16-byte packs a lane (8 bf16 or 4 f32), and loads two
//   items ahead: a lane waits on one batch while the next is in flight, across row groups too;
// - the first two batches are issued before x is staged, so the weights' DRAM latency overlaps
//   the reads of x and of the norm weight;
// - the block stages its rows of x in shared memory as f32 times the norm weight, and sums the
//   squares of x in the same pass; 1 / rms scales the finished dot products (sum_k w x nw / rms
//   is the normalised product), so the norm costs no pass over x of its own;
// - NR rows of x (up to 8) are multiplied against each weight pack while it is in registers, so
//   a few tokens cost the same weight traffic as one; more rows use more row groups (grid.y).
// Rows of w that are not 16-byte aligned (in not a multiple of the pack, or an odd base) take the
// same kernel with one-element loads. An x row longer than the shared tile (44 KiB over NR rows)
// is staged tile by tile.
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
// Packs a lane loads per item (per matrix: the SwiGLU's two matrices take half each).
constexpr int kUnroll = 4;
// Output rows a warp owns on the wide path.
constexpr int kWideRows = 4;
// 44 KiB: static plus dynamic shared memory above 48 KiB would need an opt-in per kernel.
constexpr int kSmemFloats = 11264;
// The wide path pays off once one-row warps would need this many blocks an SM.
constexpr int kBlocksPerSm = 8;
// Resident blocks asked of ptxas for one or two x rows of f32 weights (96 registers): the bytes in
// flight an SM grow with the warps. bf16 packs unpack to twice the floats: at 96 registers they
// spill, so ptxas picks (~112: 4 blocks an SM).
constexpr int min_blocks(int nr, int v) { return nr <= 2 && v <= 4 ? 5 : 1; }

struct Params {
  const void* x;             // [n, in]
  const float* norm_weight;  // [in] or null
  const void* w;             // [out, in]
  const void* w_up;          // [out, in] or null
  void* y;                   // [n, out]
  int n, in, out;
  int tile;  // x elements staged per pass, a multiple of 8
  float eps;
  bool x_bf16, y_bf16, accumulate;
};

// x: [n, in], element i of it.
__device__ __forceinline__ float load_x(const void* x, bool bf16, long long i) {
  return bf16 ? to_float(static_cast<const __nv_bfloat16*>(x)[i]) : static_cast<const float*>(x)[i];
}

// acc + sum_v pack[v] * xr[v].
// xr: [V].
template <class W, int V>
__device__ __forceinline__ float dot_pack(const Pack<W, V>& pack, const float* xr, float acc) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int v = 0; v < V; v += 4) {
      const float4 xv = *reinterpret_cast<const float4*>(xr + v);
      acc = fmaf(to_float(pack.v[v]), xv.x, acc);
      acc = fmaf(to_float(pack.v[v + 1]), xv.y, acc);
      acc = fmaf(to_float(pack.v[v + 2]), xv.z, acc);
      acc = fmaf(to_float(pack.v[v + 3]), xv.w, acc);
    }
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) acc = fmaf(to_float(pack.v[v]), xr[v], acc);
  }
  return acc;
}

// One item of a block's work: load batch b of tile k0 of row group g.
struct Cursor {
  int g, k0, b;
};

// The kernel's state and steps. Every thread of a block walks the same items (g, k0 and b are
// block-uniform), so the barriers of the staging and the shuffles of the reduction are uniform.
// V: elements a load (16 bytes, or 1 on the unaligned path). Dynamic shared memory: NR * tile floats.
template <class W, int NR, int ROWS, int V, bool kGlu>
struct Matvec {
  static constexpr int kLanesPerRow = 32 / ROWS;
  static constexpr int kGroupRows = kWarps * ROWS;
  static constexpr int U = kGlu ? kUnroll / 2 : kUnroll;
  using P = Pack<W, V>;

  const Params p;
  float* xs;                   // [NR][tile]
  float (*sumsq)[NR];          // [kWarps][NR]: each warp's share of the squares of x
  const W* w;
  const W* w_up;
  int r0, nr, groups, sub, row_in_group;
  bool staged = false;
  float acc[NR], acc_up[NR];

  __device__ __forceinline__ int packs(int k0) const { return min(p.tile, p.in - k0) / V; }
  __device__ __forceinline__ int batches(int k0) const {
    return (packs(k0) + kLanesPerRow * U - 1) / (kLanesPerRow * U);
  }

  __device__ __forceinline__ Cursor next(Cursor c) const {
    if (++c.b == batches(c.k0)) {
      c.b = 0;
      c.k0 += p.tile;
      if (c.k0 >= p.in) {
        c.k0 = 0;
        c.g += static_cast<int>(gridDim.x);
      }
    }
    return c;
  }

  // Pack index of slot u of the lane's share of item c (valid while < packs(c.k0)).
  __device__ __forceinline__ int pack_index(const Cursor& c, int u) const { return sub + kLanesPerRow * (c.b * U + u); }

  __device__ __forceinline__ void load(const Cursor& c, P (&wb)[U], P (&ub)[U]) const {
    if (c.g >= groups) return;
    const int row = c.g * kGroupRows + row_in_group;
    if (row >= p.out) return;
    const long long base = static_cast<long long>(row) * p.in + c.k0;
    const int np = packs(c.k0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = pack_index(c, u);
      if (i < np) {
        wb[u] = *reinterpret_cast<const P*>(w + base + static_cast<long long>(i) * V);
        if constexpr (kGlu) ub[u] = *reinterpret_cast<const P*>(w_up + base + static_cast<long long>(i) * V);
      }
    }
  }

  // Stages x[r0 + r][k0 .. k0 + kt) * norm_weight for every row r, adding the squares of x to
  // this warp's sums on the block's first pass over x (a later row group re-stages the same x).
  __device__ __forceinline__ void stage(const Cursor& c) {
    const int kt = min(p.tile, p.in - c.k0);
    const bool norm = p.norm_weight != nullptr;
    const bool first = c.g == static_cast<int>(blockIdx.x);
    __syncthreads();  // the previous tile has been read by every warp
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      if (r >= nr) break;
      const long long base = static_cast<long long>(r0 + r) * p.in + c.k0;
      float sq = 0.0f;
#pragma unroll 4
      for (int k = static_cast<int>(threadIdx.x); k < kt; k += kThreads) {
        float v = load_x(p.x, p.x_bf16, base + k);
        if (norm) {
          sq = fmaf(v, v, sq);
          v *= p.norm_weight[c.k0 + k];
        }
        xs[r * p.tile + k] = v;
      }
      if (norm && first) {
        sq = warp_reduce(sq, Sum{});
        if (threadIdx.x % 32 == 0) sumsq[threadIdx.x / 32][r] += sq;  // its own slot: no race
      }
    }
    __syncthreads();
    staged = true;
  }

  __device__ __forceinline__ void compute(const Cursor& c, const P (&wb)[U], const P (&ub)[U]) {
    if (c.g * kGroupRows + row_in_group >= p.out) return;
    const int np = packs(c.k0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = pack_index(c, u);
      if (i >= np) break;
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        if (r < nr) {
          const float* xr = xs + r * p.tile + i * V;
          acc[r] = dot_pack<W, V>(wb[u], xr, acc[r]);
          if constexpr (kGlu) acc_up[r] = dot_pack<W, V>(ub[u], xr, acc_up[r]);
        }
      }
    }
  }

  // After the last item of row group g: sums each row's lanes, writes y, clears the sums.
  __device__ __forceinline__ void finish(int g) {
#pragma unroll
    for (int r = 0; r < NR; ++r) {
#pragma unroll
      for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2) {
        acc[r] += __shfl_xor_sync(kFullMask, acc[r], offset);
        if constexpr (kGlu) acc_up[r] += __shfl_xor_sync(kFullMask, acc_up[r], offset);
      }
    }
    const int row = g * kGroupRows + row_in_group;
    if (sub == 0 && row < p.out) {
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        if (r >= nr) break;
        float scale = 1.0f;
        if (p.norm_weight != nullptr) {
          float ss = 0.0f;
#pragma unroll
          for (int wi = 0; wi < kWarps; ++wi) ss += sumsq[wi][r];
          scale = 1.0f / sqrtf(ss / static_cast<float>(p.in) + p.eps);
        }
        float v = acc[r] * scale;
        if constexpr (kGlu) {
          const float up = acc_up[r] * scale;
          v = v / (1.0f + expf(-v)) * up;
        }
        const long long at = static_cast<long long>(r0 + r) * p.out + row;
        if (p.y_bf16) {
          static_cast<__nv_bfloat16*>(p.y)[at] = from_float<__nv_bfloat16>(v);
        } else {
          float* y = static_cast<float*>(p.y);
          y[at] = p.accumulate ? y[at] + v : v;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[r] = acc_up[r] = 0.0f;
  }

  // Computes item c0 from `wb`/`ub` (loaded two steps ago), refills them with the item after c1
  // (the other buffers hold c1), then moves on: c0 = c1, c1 = that item.
  __device__ __forceinline__ void step(Cursor& c0, Cursor& c1, P (&wb)[U], P (&ub)[U]) {
    if (c0.b == 0 && (!staged || p.in > p.tile)) stage(c0);
    compute(c0, wb, ub);
    const Cursor c2 = next(c1);
    load(c2, wb, ub);
    if (c0.b + 1 == batches(c0.k0) && c0.k0 + p.tile >= p.in) finish(c0.g);
    c0 = c1;
    c1 = c2;
  }
};

// grid.x: blocks walking row groups of kWarps * ROWS output rows; grid.y: groups of NR rows of x.
template <class W, int NR, int ROWS, int V, bool kGlu>
__global__ void __launch_bounds__(kThreads, min_blocks(NR, V)) matvec_kernel(Params p) {
  using M = Matvec<W, NR, ROWS, V, kGlu>;
  extern __shared__ float4 smem[];
  __shared__ float sumsq[kWarps][NR];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  pdl_trigger();  // the next kernel may start its own weight loads
  M m{p, reinterpret_cast<float*>(smem), sumsq, static_cast<const W*>(p.w), static_cast<const W*>(p.w_up)};
  m.r0 = static_cast<int>(blockIdx.y) * NR;
  m.nr = min(NR, p.n - m.r0);
  m.groups = (p.out + M::kGroupRows - 1) / M::kGroupRows;
  m.sub = lane % M::kLanesPerRow;
  m.row_in_group = warp * ROWS + lane / M::kLanesPerRow;
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    m.acc[r] = m.acc_up[r] = 0.0f;
    if (lane == 0) sumsq[warp][r] = 0.0f;  // read only after the staging's barriers
  }

  typename M::P wa[M::U], ua[M::U], wb[M::U], ub[M::U];
  Cursor c0{static_cast<int>(blockIdx.x), 0, 0};
  Cursor c1 = m.next(c0);
  // The weights are constant: their first two batches load while the kernel before still runs.
  m.load(c0, wa, ua);
  m.load(c1, wb, ub);
  pdl_wait();  // x (and y, when accumulating) come from the kernels before
  // Two steps an iteration so that the buffers alternate without copies (a copy would wait on
  // the loads still in flight).
  while (c0.g < m.groups) {
    m.step(c0, c1, wa, ua);
    if (c0.g >= m.groups) break;
    m.step(c0, c1, wb, ub);
  }
}

// Blocks of `kernel` resident on one SM with `smem` dynamic bytes, asked once per instantiation,
// device and size (the host cost of the query would show in every decode step).
template <class W, int NR, int ROWS, int V, bool kGlu>
int blocks_per_sm(std::size_t smem) {
  thread_local int device_cached = -1, per_sm = 0;
  thread_local std::size_t smem_cached = 0;
  int device = 0;
  IGNIS_CUDA_CHECK(cudaGetDevice(&device));
  if (device != device_cached || smem != smem_cached) {
    IGNIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, matvec_kernel<W, NR, ROWS, V, kGlu>,
                                                                   kThreads, smem));
    device_cached = device;
    smem_cached = smem;
  }
  return std::max(per_sm, 1);
}

template <class W, int NR, int ROWS, int V, bool kGlu>
void launch(Params p, Stream stream) {
  p.tile = std::min((p.in + 7) / 8 * 8, kSmemFloats / NR / 8 * 8);
  const std::size_t smem = static_cast<std::size_t>(NR) * p.tile * sizeof(float);
  const long long groups = (p.out + kWarps * ROWS - 1) / (kWarps * ROWS);
  const unsigned row_groups = ceil_div(p.n, NR);
  // More blocks than fit at once would start a second wave behind blocks that loop anyway.
  const long long resident = static_cast<long long>(sm_count()) * blocks_per_sm<W, NR, ROWS, V, kGlu>(smem);
  const long long blocks = std::min<long long>(groups, std::max<long long>(1, resident / row_groups));
  const dim3 grid(static_cast<unsigned>(blocks), row_groups);
  launch_kernel(matvec_kernel<W, NR, ROWS, V, kGlu>, grid, kThreads, smem, stream, p);
  IGNIS_CHECK_LAUNCH();
}

template <class W, int NR, bool kGlu>
void launch_rows(const Params& p, bool vec, Stream stream) {
  constexpr int V = 16 / static_cast<int>(sizeof(W));
  if (!vec) return launch<W, NR, 1, 1, kGlu>(p, stream);
  // Wide rows only for one or two tokens: more x rows already reuse each pack NR times.
  if constexpr (NR <= 2) {
    const long long wide_groups = (p.out + kWarps * kWideRows - 1) / (kWarps * kWideRows);
    if (wide_groups >= static_cast<long long>(sm_count()) * kBlocksPerSm)
      return launch<W, NR, kWideRows, V, kGlu>(p, stream);
  }
  return launch<W, NR, 1, V, kGlu>(p, stream);
}

template <class W, int NR>
void launch_variant(const Params& p, bool vec, bool glu, Stream stream) {
  if (glu) return launch_rows<W, NR, true>(p, vec, stream);
  return launch_rows<W, NR, false>(p, vec, stream);
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
