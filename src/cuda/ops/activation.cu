// Element-wise activations: one thread per 16-byte pack of every operand (a grid-stride loop past
// the grid limit); the last n % V elements take the same kernel with V = 1. Operands that are not 16-byte
// aligned take the V = 1 kernel throughout. All arithmetic in fp32. f32 uses the accurate expf and
// IEEE division; f16/bf16 use __expf and __fdividef, whose ~1e-6 relative error is far below a
// 16-bit ulp (2^-11 at best) and which keep the bf16 kernels memory-bound rather than ALU-bound.
// GELU (tanh) is computed as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), since
// 0.5 (1 + tanh(u)) = sigmoid(2u): one exp instead of tanhf, and no 1 + tanh cancellation for x < 0.
#include <algorithm>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/ops/activation.h"

namespace ignis::cuda {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// One 16-byte pack of every operand per thread and 128-thread blocks, one block per 128 packs: the
// shape of a plain copy kernel, for every dtype. At bf16 it measured 0-2% over the shape it replaced
// (4 packs a thread, 256-thread blocks; H100 2026-11-21 19:21-19:25: gelu 0.98-1.00x -> 1.00-1.02x torch,
// swiglu 4096 x 4096 87 -> 89% of copy); at f32 that shape had been 2-4% under torch (H200).
constexpr int kThreads = 128;

struct Accurate {
  __device__ static float exp(float x) { return expf(x); }
  __device__ static float div(float a, float b) { return a / b; }
};

// __fdividef(a, b) is 0 for |b| > 2^126: the right limit here, where b = 1 + exp(..) is huge.
struct Fast {
  __device__ static float exp(float x) { return __expf(x); }
  __device__ static float div(float a, float b) { return __fdividef(a, b); }
};

// exp(-x) overflows to inf for x < -88, and 1 / inf = 0 is the right limit.
template <class M>
__device__ __forceinline__ float sigmoid(float x) {
  return M::div(1.0f, 1.0f + M::exp(-x));
}

// 2u for GELU: sigmoid(2u) = 0.5 (1 + tanh(u)).
__device__ __forceinline__ float gelu_2u(float x) { return 2.0f * kGeluScale * x * (1.0f + kGeluCubic * x * x); }

// Each op maps kIn input values of one element to kOut output values, with math M.
struct GeluForward {
  static constexpr int kIn = 1, kOut = 1;
  template <class M>
  __device__ static void apply(const float (&in)[1], float (&out)[1]) {
    out[0] = M::div(in[0], 1.0f + M::exp(-gelu_2u(in[0])));
  }
};

struct GeluBackward {
  static constexpr int kIn = 2, kOut = 1;  // x, dy -> dx
  // d/dx [x s] with s = sigmoid(2u): s + x * 2 s (1 - s) * u'. 1 - s is computed as e * s
  // (e = exp(-2u)), free of the 1 - s cancellation as s -> 1.
  template <class M>
  __device__ static void apply(const float (&in)[2], float (&out)[1]) {
    const float x = in[0];
    const float e = M::exp(-gelu_2u(x));
    const float s = M::div(1.0f, 1.0f + e);
    const float rest = e == INFINITY ? 0.0f : e * s;  // 1 - s; inf * 0 would be NaN
    // A saturated sigmoid has s (1 - s) = 0; skipping the term avoids 0 * inf when x * x overflows.
    const float ss = s * rest;
    const float slope = ss == 0.0f ? 0.0f : 2.0f * x * ss * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    out[0] = in[1] * (s + slope);
  }
};

struct SiluForward {
  static constexpr int kIn = 1, kOut = 1;
  template <class M>
  __device__ static void apply(const float (&in)[1], float (&out)[1]) {
    out[0] = M::div(in[0], 1.0f + M::exp(-in[0]));
  }
};

struct SiluBackward {
  static constexpr int kIn = 2, kOut = 1;  // x, dy -> dx
  template <class M>
  __device__ static void apply(const float (&in)[2], float (&out)[1]) {
    const float s = sigmoid<M>(in[0]);
    out[0] = in[1] * s * (1.0f + in[0] * (1.0f - s));
  }
};

struct SwiGluForward {
  static constexpr int kIn = 2, kOut = 1;  // gate, up -> out
  template <class M>
  __device__ static void apply(const float (&in)[2], float (&out)[1]) {
    out[0] = in[0] * sigmoid<M>(in[0]) * in[1];
  }
};

struct SwiGluBackward {
  static constexpr int kIn = 3, kOut = 2;  // gate, up, dout -> dgate, dup
  template <class M>
  __device__ static void apply(const float (&in)[3], float (&out)[2]) {
    const float g = in[0];
    const float s = sigmoid<M>(g);
    out[0] = in[2] * in[1] * s * (1.0f + g * (1.0f - s));
    out[1] = in[2] * g * s;
  }
};

template <class T, int N>
struct Ptrs {
  T* p[N];
};

template <class T>
using MathFor = std::conditional_t<std::is_same_v<T, float>, Accurate, Fast>;

// Computes the V elements of one pack of every input and stores the outputs' packs at item i.
// out.p[k]: [n], the op's outputs.
template <class T, int V, class Op>
__device__ __forceinline__ void compute_store(const Pack<T, V> (&a)[Op::kIn], const Ptrs<T, Op::kOut>& out,
                                              long long i) {
  float r[Op::kOut][V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    float ai[Op::kIn], ri[Op::kOut];
#pragma unroll
    for (int k = 0; k < Op::kIn; ++k) ai[k] = to_float(a[k].v[j]);
    Op::template apply<MathFor<T>>(ai, ri);
#pragma unroll
    for (int k = 0; k < Op::kOut; ++k) r[k][j] = ri[k];
  }
#pragma unroll
  for (int k = 0; k < Op::kOut; ++k) store_floats<T, V>(out.p[k] + i * V, r[k]);
}

// Items are packs of V elements (V = 1: single elements); thread t of block b takes item
// b * kThreads + t, and strides by the grid past the grid limit. The tail (< V elements after the
// last pack) is one element per thread of block 0.
// in.p[k], out.p[k]: [items * V + tail] each.
template <class T, int V, class Op>
__global__ void __launch_bounds__(kThreads)
    elementwise_kernel(Ptrs<const T, Op::kIn> in, Ptrs<T, Op::kOut> out, long long items, int tail) {
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < items;
       i += static_cast<long long>(gridDim.x) * kThreads) {
    Pack<T, V> a[Op::kIn];
#pragma unroll
    for (int k = 0; k < Op::kIn; ++k) a[k] = reinterpret_cast<const Pack<T, V>*>(in.p[k])[i];
    compute_store<T, V, Op>(a, out, i);
  }
  const long long t = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  if (t < tail) {
    const long long e = items * V + t;
    Pack<T, 1> a[Op::kIn];
#pragma unroll
    for (int k = 0; k < Op::kIn; ++k) a[k].v[0] = in.p[k][e];
    compute_store<T, 1, Op>(a, out, e);
  }
}

// *in[k], *out[k]: [n...], one shape and dtype.
template <class T, class Op>
void launch(const Tensor* const (&in)[Op::kIn], const Tensor* const (&out)[Op::kOut], Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long n = in[0]->numel();
  if (n == 0) return;
  Ptrs<const T, Op::kIn> ip;
  Ptrs<T, Op::kOut> op;
  bool aligned = true;
  for (int k = 0; k < Op::kIn; ++k) {
    ip.p[k] = in[k]->template data_as<const T>();
    aligned = aligned && pack_aligned<T, V>(ip.p[k]);
  }
  for (int k = 0; k < Op::kOut; ++k) {
    op.p[k] = out[k]->template data_as<T>();
    aligned = aligned && pack_aligned<T, V>(op.p[k]);
  }
  const long long items = aligned ? n / V : n;
  const int tail = aligned ? static_cast<int>(n % V) : 0;
  const long long wanted = std::max<long long>(1, ceil_div(items, kThreads));
  const unsigned blocks = static_cast<unsigned>(std::min<long long>(wanted, 0x7fffffffLL));
  if (aligned)
    elementwise_kernel<T, V, Op><<<blocks, kThreads, 0, to_cuda(stream)>>>(ip, op, items, tail);
  else
    elementwise_kernel<T, 1, Op><<<blocks, kThreads, 0, to_cuda(stream)>>>(ip, op, items, 0);
  IGNIS_CHECK_LAUNCH();
}

// *in[k], *out[k]: [n...], one shape and dtype.
template <class Op>
void dispatch(const char* where, const Tensor* const (&in)[Op::kIn], const Tensor* const (&out)[Op::kOut],
              Stream stream) {
  switch (in[0]->dtype()) {
    case DType::f32: return launch<float, Op>(in, out, stream);
    case DType::f16: return launch<__half, Op>(in, out, stream);
    case DType::bf16: return launch<__nv_bfloat16, Op>(in, out, stream);
    default: fail_expected(where, "dtype", "f32, f16 or bf16", in[0]->dtype());
  }
}

}  // namespace

void gelu_tanh_forward(const Tensor& x, const Tensor& y, Stream stream) {
  dispatch<GeluForward>("gelu_tanh_forward", {&x}, {&y}, stream);
}

void gelu_tanh_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, Stream stream) {
  dispatch<GeluBackward>("gelu_tanh_backward", {&x, &dy}, {&dx}, stream);
}

void silu_forward(const Tensor& x, const Tensor& y, Stream stream) {
  dispatch<SiluForward>("silu_forward", {&x}, {&y}, stream);
}

void silu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, Stream stream) {
  dispatch<SiluBackward>("silu_backward", {&x, &dy}, {&dx}, stream);
}

void swiglu_forward(const Tensor& gate, const Tensor& up, const Tensor& out, Stream stream) {
  dispatch<SwiGluForward>("swiglu_forward", {&gate, &up}, {&out}, stream);
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup, Stream stream) {
  dispatch<SwiGluBackward>("swiglu_backward", {&gate, &up, &dout}, {&dgate, &dup}, stream);
}

}  // namespace ignis::cuda
