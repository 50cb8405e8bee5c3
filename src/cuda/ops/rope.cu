// Rotary embedding: one thread owns a few rotation pairs (or a few pass-through elements) of
// one token and walks a group of that token's heads, so each cos/sin is computed once per
// group instead of once per head. Accesses are 16-byte packs when head_dim, rotary_dim and the
// pointers allow. The angle comes from rope_angle.cuh (reduced in double).
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/rope_angle.cuh"
#include "cuda/ops/rope.h"

namespace ignis::cuda {
namespace {

struct RopeGrid {
  int tokens;      // batch * seqlen
  int seqlen;
  int heads, head_dim, rotary_dim;
  int rot_units;   // threads per (token, head group) that rotate pairs
  int units;       // rot_units plus the pass-through threads
  int heads_per_group;
  long long position_offset;
  float attention_factor, sin_sign;
};

// N consecutive elements: one aligned pack when kVec, else element by element (odd head_dim).
// src: [N].
template <class T, int N, bool kVec>
__device__ __forceinline__ void load_n(const T* src, float (&dst)[N]) {
  if constexpr (kVec) {
    load_floats<T, N>(src, dst);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = to_float(src[i]);
  }
}

// dst: [N].
template <class T, int N, bool kVec>
__device__ __forceinline__ void store_n(T* dst, const float (&src)[N]) {
  if constexpr (kVec) {
    store_floats<T, N>(dst, src);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = from_float<T>(src[i]);
  }
}

// N consecutive elements kept as raw storage until used (half the registers of floats for 16-bit types).
// x is read once: evict-first (.cs) loads leave L2 to y, which the next kernel reads.
// src: [N].
template <class T, int N, bool kVec>
__device__ __forceinline__ void load_raw(const T* src, Pack<T, N>& dst) {
  if constexpr (kVec) {
    static_assert(sizeof(Pack<T, N>) == 16, "kVec packs are 16 bytes");
    const uint4 word = __ldcs(reinterpret_cast<const uint4*>(src));
    dst = *reinterpret_cast<const Pack<T, N>*>(&word);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst.v[i] = src[i];
  }
}

template <class T, bool kVec>
constexpr int kElems = kVec ? 16 / static_cast<int>(sizeof(T)) : 1;  // elements per access
template <class T, bool kInterleaved, bool kVec>
constexpr int kPairs = kInterleaved ? (kVec ? kElems<T, kVec> / 2 : 1) : kElems<T, kVec>;  // pairs per thread

// Most heads a thread rotates with one cos/sin computation. Registers hold every head's packs plus
// 2P cos/sin floats. 4 heads for every type (~70 registers): 128 bytes a thread in flight and one
// angle per 32 bytes moved. 16-bit types stopped at 2 heads (56 registers: 64 bytes a thread, one
// angle per 16 bytes) and reached 71% of copy where f32 with 4 heads reached 85%.
constexpr int kMaxGroup = 4;

// x and y are not __restrict__: y may be x (in place; each thread reads and writes only its own
// elements, all reads first). grid.y indexes head groups of g.heads_per_group <= kMaxGroup heads.
// x, y: [tokens, heads, head_dim]; inv_freq: [rotary_dim / 2]; batch_offsets: [tokens / seqlen] or null.
template <class T, bool kInterleaved, bool kVec>
__global__ void rope_kernel(const T* x, T* y, const float* __restrict__ inv_freq,
                            const int* __restrict__ batch_offsets, RopeGrid g) {
  constexpr int V = kElems<T, kVec>;
  constexpr int P = kPairs<T, kInterleaved, kVec>;
  // tokens * units < 2^31 (checked at launch): 32-bit division is much cheaper than 64-bit.
  const unsigned work = blockIdx.x * blockDim.x + threadIdx.x;
  if (work >= static_cast<unsigned>(g.tokens) * static_cast<unsigned>(g.units)) return;
  const int unit = static_cast<int>(work % static_cast<unsigned>(g.units));
  const int token = static_cast<int>(work / static_cast<unsigned>(g.units));
  const int h0 = static_cast<int>(blockIdx.y) * g.heads_per_group;
  const int h1 = min(h0 + g.heads_per_group, g.heads);

  if (unit >= g.rot_units) {
    const int e = g.rotary_dim + (unit - g.rot_units) * V;
    for (int h = h0; h < h1; ++h) {
      const long long at = (static_cast<long long>(token) * g.heads + h) * g.head_dim + e;
      float v[V];
      load_n<T, V, kVec>(x + at, v);
      store_n<T, V, kVec>(y + at, v);
    }
    return;
  }

  const int i0 = unit * P;
  const int half = g.rotary_dim / 2;
  // Every head of the group is loaded before the cos/sin math, which then runs under the loads'
  // latency; rotate_half keeps two packs a head (a at i0, b at half + i0), interleaved one.
  constexpr int N = kInterleaved ? 2 * P : P;
  const int lo = kInterleaved ? 2 * i0 : i0;
  Pack<T, N> a[kMaxGroup], b[kMaxGroup];
#pragma unroll
  for (int k = 0; k < kMaxGroup; ++k) {
    if (h0 + k < h1) {
      const long long row = (static_cast<long long>(token) * g.heads + h0 + k) * g.head_dim;
      load_raw<T, N, kVec>(x + row + lo, a[k]);
      if constexpr (!kInterleaved) load_raw<T, N, kVec>(x + row + half + i0, b[k]);
    }
  }

  const int batch = token / g.seqlen;
  const long long pos = g.position_offset + (batch_offsets ? batch_offsets[batch] : 0) + (token - batch * g.seqlen);
  float c[P], s[P];
#pragma unroll
  for (int j = 0; j < P; ++j) {
    angle_cos_sin<sizeof(T) == 2>(pos, inv_freq[i0 + j], c[j], s[j]);
    c[j] *= g.attention_factor;
    s[j] *= g.attention_factor * g.sin_sign;
  }

#pragma unroll
  for (int k = 0; k < kMaxGroup; ++k) {
    if (h0 + k >= h1) break;
    const long long row = (static_cast<long long>(token) * g.heads + h0 + k) * g.head_dim;
    if constexpr (kInterleaved) {
      float v[N];
      to_floats(a[k], v);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const float u = v[2 * j], w = v[2 * j + 1];
        v[2 * j] = u * c[j] - w * s[j];
        v[2 * j + 1] = w * c[j] + u * s[j];
      }
      store_n<T, N, kVec>(y + row + lo, v);
    } else {
      float u[P], w[P];
      to_floats(a[k], u);
      to_floats(b[k], w);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const float ru = u[j] * c[j] - w[j] * s[j];
        w[j] = w[j] * c[j] + u[j] * s[j];
        u[j] = ru;
      }
      store_n<T, P, kVec>(y + row + i0, u);
      store_n<T, P, kVec>(y + row + half + i0, w);
    }
  }
}

// About one wave of an H100/H200 at full occupancy (132 x 2048 threads); beyond that, more heads
// per thread share each cos/sin (more bytes in flight a thread, fewer angles).
constexpr long long kTargetThreads = 1 << 18;
// 128 threads: at ~70 registers an SM holds 28 warps, all usable in blocks of 4 warps (24 in blocks
// of 8), i.e. 112 KB of loads in flight an SM with 4 heads of 16-bit packs.
constexpr int kBlock = 128;

// x, y: [batch, seqlen, heads, head_dim]; inv_freq: [rotary_dim / 2].
template <class T, bool kInterleaved, bool kVec>
void launch(const Tensor& x, const Tensor& inv_freq, const Tensor& y, const RopeArgs& args, float sin_sign,
            Stream stream) {
  constexpr int V = kElems<T, kVec>;
  constexpr int P = kPairs<T, kInterleaved, kVec>;
  const long long tokens = x.size(0) * x.size(1);
  const long long heads = x.size(2);
  const bool in_place = x.data() == y.data();
  RopeGrid g{};
  g.seqlen = static_cast<int>(x.size(1));
  g.heads = static_cast<int>(heads);
  g.head_dim = static_cast<int>(x.size(3));
  g.rotary_dim = static_cast<int>(args.rotary_dim);
  g.rot_units = g.rotary_dim / 2 / P;
  g.units = g.rot_units + (in_place ? 0 : (g.head_dim - g.rotary_dim) / V);
  const long long work = tokens * g.units;
  check_arg(work < (1LL << 31) && heads < 65536, "rope", "tokens * units, heads", "< 2^31, < 65536",
            detail::lazy_concat(work, ", ", heads));
  g.tokens = static_cast<int>(tokens);
  g.position_offset = args.position_offset;
  g.attention_factor = args.attention_factor;
  g.sin_sign = sin_sign;
  long long per_group = 1;
  while (per_group < heads && per_group < kMaxGroup &&
         work * ((heads + 2 * per_group - 1) / (2 * per_group)) >= kTargetThreads)
    per_group *= 2;
  g.heads_per_group = static_cast<int>(per_group);
  const dim3 grid(ceil_div(work, kBlock), static_cast<unsigned>((heads + per_group - 1) / per_group));
  const int* offsets = args.batch_offsets ? args.batch_offsets->data_as<const int>() : nullptr;
  rope_kernel<T, kInterleaved, kVec><<<grid, kBlock, 0, to_cuda(stream)>>>(
      x.data_as<const T>(), y.data_as<T>(), inv_freq.data_as<const float>(), offsets, g);
  IGNIS_CHECK_LAUNCH();
}

// x, y: [batch, seqlen, heads, head_dim]; inv_freq: [rotary_dim / 2].
template <class T>
void launch_typed(const Tensor& x, const Tensor& inv_freq, const Tensor& y, const RopeArgs& args, float sin_sign,
                  Stream stream) {
  if (x.numel() == 0) return;
  constexpr int V = 16 / sizeof(T);
  const bool interleaved = args.style == RopeStyle::interleaved;
  const long long head_dim = x.size(3), half = args.rotary_dim / 2;
  // Every pack must start on a 16-byte boundary: rows, the rotated block and its halves.
  const bool vec = head_dim % V == 0 && (interleaved ? args.rotary_dim % V == 0 : half % V == 0) &&
                   pack_aligned<T, V>(x.data()) && pack_aligned<T, V>(y.data());
  if (interleaved) {
    if (vec) return launch<T, true, true>(x, inv_freq, y, args, sin_sign, stream);
    return launch<T, true, false>(x, inv_freq, y, args, sin_sign, stream);
  }
  if (vec) return launch<T, false, true>(x, inv_freq, y, args, sin_sign, stream);
  return launch<T, false, false>(x, inv_freq, y, args, sin_sign, stream);
}

}  // namespace

void rope(const Tensor& x, const Tensor& inv_freq, const Tensor& y, const RopeArgs& args, float sin_sign,
          Stream stream) {
  switch (x.dtype()) {
    case DType::f32: return launch_typed<float>(x, inv_freq, y, args, sin_sign, stream);
    case DType::f16: return launch_typed<__half>(x, inv_freq, y, args, sin_sign, stream);
    case DType::bf16: return launch_typed<__nv_bfloat16>(x, inv_freq, y, args, sin_sign, stream);
    default: fail_expected("rope", "x.dtype", "f32, f16 or bf16", x.dtype());
  }
}

}  // namespace ignis::cuda
