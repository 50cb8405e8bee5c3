// rope_qkv_append: one thread per rotated pair or pass-through element of a q/k head, or per
// element of a v head, of one token. Every thread reads the sequence's length from the device
// before anything advances it:
// - a small call (a decode step) runs as one block, which advances the length itself after a
//   __syncthreads, so a decode step is one launch;
// - a large one (prefill) runs as many blocks, which cannot order themselves against each other,
//   and a second one-thread kernel on the same stream advances the length after all of them.
// Which of the two depends only on the shapes, so a captured CUDA graph replays the same launches.
#include <algorithm>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/rope_angle.cuh"
#include "cuda/ops/rope_append.h"

namespace ignis::cuda {
namespace {

// Work items up to which one block does everything (1024 threads, a few items each).
constexpr long long kOneBlockWork = 8192;
constexpr int kMaxThreads = 1024;
constexpr int kThreads = 256;

struct Params {
  const float* qkv;       // [n, (heads_q + 2 * heads_kv) * head_dim]
  const float* inv_freq;  // [rotary_dim / 2]
  void* q_out;            // [n, heads_q, head_dim]
  void* k_cache;          // [max_seqlen, heads_kv, head_dim]
  void* v_cache;          // [max_seqlen, heads_kv, head_dim]
  int* lengths;           // [1]
  int n, heads_q, heads_kv, head_dim, rotary_dim, max_seqlen;
  float attention_factor;
  bool advance;  // one-block launch: this kernel advances the length
};

template <class T, bool kInterleaved>
__global__ void rope_append_kernel(Params p) {
  pdl_trigger();
  pdl_wait();  // q|k|v and the length come from the kernels before
  const int start = p.lengths[0];
  const int half = p.rotary_dim / 2;
  const int head_units = p.head_dim - half;  // half pairs + (head_dim - rotary_dim) pass-through
  const int rotated = (p.heads_q + p.heads_kv) * head_units;
  const int units = rotated + p.heads_kv * p.head_dim;
  const long long width = static_cast<long long>(p.heads_q + 2 * p.heads_kv) * p.head_dim;
  const long long total = static_cast<long long>(p.n) * units;
  T* q_out = static_cast<T*>(p.q_out);
  T* k_cache = static_cast<T*>(p.k_cache);
  T* v_cache = static_cast<T*>(p.v_cache);
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(idx / units);
    const int u = static_cast<int>(idx - static_cast<long long>(t) * units);
    const long long pos = static_cast<long long>(start) + t;
    // The host checked its own copy of the length; if the device copy disagrees, drop the k/v
    // row rather than write outside the cache.
    const bool in_cache = pos >= 0 && pos < p.max_seqlen;
    const float* row = p.qkv + t * width;
    if (u < rotated) {
      const int h = u / head_units, j = u - h * head_units;  // q heads, then k heads, as in qkv
      const bool is_q = h < p.heads_q;
      if (!is_q && !in_cache) continue;
      const float* x = row + static_cast<long long>(h) * p.head_dim;
      T* dst = is_q ? q_out + (static_cast<long long>(t) * p.heads_q + h) * p.head_dim
                    : k_cache + (pos * p.heads_kv + (h - p.heads_q)) * p.head_dim;
      if (j < half) {
        const int ia = kInterleaved ? 2 * j : j;
        const int ib = kInterleaved ? 2 * j + 1 : j + half;
        float c, s;
        angle_cos_sin(pos, p.inv_freq[j], c, s);
        c *= p.attention_factor;
        s *= p.attention_factor;
        const float a = x[ia], b = x[ib];
        dst[ia] = from_float<T>(a * c - b * s);
        dst[ib] = from_float<T>(b * c + a * s);
      } else {
        const int e = p.rotary_dim + (j - half);
        dst[e] = from_float<T>(x[e]);
      }
    } else {
      if (!in_cache) continue;
      const int v = u - rotated;
      const int h = v / p.head_dim, e = v - h * p.head_dim;
      v_cache[(pos * p.heads_kv + h) * p.head_dim + e] =
          from_float<T>(row[static_cast<long long>(p.heads_q + p.heads_kv + h) * p.head_dim + e]);
    }
  }
  if (p.advance) {
    __syncthreads();  // every thread of the (only) block has read the length
    if (threadIdx.x == 0) p.lengths[0] = start + p.n;
  }
}

__global__ void advance_kernel(int* lengths, int n) {
  pdl_trigger();
  pdl_wait();  // every block of the append has read the length
  lengths[0] += n;
}

template <class T>
void launch(const Params& p, long long total, bool interleaved, Stream stream) {
  const bool one_block = p.advance;
  const int threads = one_block ? static_cast<int>(std::min<long long>(kMaxThreads, (total + 31) / 32 * 32)) : kThreads;
  const unsigned blocks = one_block ? 1u : std::min(ceil_div(total, kThreads), 65535u);
  if (interleaved)
    launch_kernel(rope_append_kernel<T, true>, blocks, threads, 0, stream, p);
  else
    launch_kernel(rope_append_kernel<T, false>, blocks, threads, 0, stream, p);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

void rope_qkv_append(const Tensor& qkv, const Tensor& inv_freq, const RopeAppendArgs& args, const Tensor& q_out,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& lengths, Stream stream) {
  const long long n = qkv.size(0);
  if (n == 0) return;
  Params p{};
  p.qkv = qkv.data_as<const float>();
  p.inv_freq = inv_freq.data_as<const float>();
  p.q_out = q_out.data();
  p.k_cache = k_cache.data();
  p.v_cache = v_cache.data();
  p.lengths = lengths.data_as<int>();
  p.n = static_cast<int>(n);
  p.heads_q = static_cast<int>(q_out.size(1));
  p.heads_kv = static_cast<int>(k_cache.size(2));
  p.head_dim = static_cast<int>(k_cache.size(3));
  p.rotary_dim = static_cast<int>(args.rotary_dim);
  p.max_seqlen = static_cast<int>(k_cache.size(1));
  p.attention_factor = args.attention_factor;
  const long long units = (p.heads_q + p.heads_kv) * static_cast<long long>(p.head_dim - p.rotary_dim / 2) +
                          static_cast<long long>(p.heads_kv) * p.head_dim;
  const long long total = n * units;
  p.advance = total <= kOneBlockWork;
  const bool interleaved = args.style == RopeStyle::interleaved;
  switch (q_out.dtype()) {
    case DType::f32: launch<float>(p, total, interleaved, stream); break;
    case DType::f16: launch<__half>(p, total, interleaved, stream); break;
    case DType::bf16: launch<__nv_bfloat16>(p, total, interleaved, stream); break;
    default: fail_expected("rope_qkv_append", "q_out.dtype", "f32, f16 or bf16", q_out.dtype());
  }
  if (!p.advance) {
    launch_kernel(advance_kernel, 1, 1, 0, stream, p.lengths, p.n);
    IGNIS_CHECK_LAUNCH();
  }
}

}  // namespace ignis::cuda
