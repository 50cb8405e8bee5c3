// Element-wise activations: one grid-stride kernel over 16-byte packs of every operand, plus a
// scalar tail for the last n % V elements. Operands that are not 16-byte aligned take the
// scalar path throughout. All arithmetic in fp32 with the accurate expf/tanhf.
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/ops/activation.h"

namespace ignis::cuda {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// exp(-x) overflows to inf for x < -88, and 1 / inf = 0 is the right limit.
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float gelu_tanh_of(float x) { return tanhf(kGeluScale * x * (1.0f + kGeluCubic * x * x)); }

// Each op maps NIn input values of one element to NOut output values.
struct GeluForward {
  static constexpr int kIn = 1, kOut = 1;
  __device__ void operator()(const float (&in)[1], float (&out)[1]) const {
    out[0] = 0.5f * in[0] * (1.0f + gelu_tanh_of(in[0]));
  }
};

struct GeluBackward {
  static constexpr int kIn = 2, kOut = 1;  // x, dy -> dx
  __device__ void operator()(const float (&in)[2], float (&out)[1]) const {
    const float x = in[0];
    const float t = gelu_tanh_of(x);
    const float sech2 = 1.0f - t * t;
    // A saturated tanh has sech2 = 0; skipping the term avoids 0 * inf when x * x overflows.
    const float slope = sech2 == 0.0f ? 0.0f : 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    out[0] = in[1] * (0.5f * (1.0f + t) + slope);
  }
};

struct SiluForward {
  static constexpr int kIn = 1, kOut = 1;
  __device__ void operator()(const float (&in)[1], float (&out)[1]) const { out[0] = in[0] * sigmoid(in[0]); }
};

struct SiluBackward {
  static constexpr int kIn = 2, kOut = 1;  // x, dy -> dx
  __device__ void operator()(const float (&in)[2], float (&out)[1]) const {
    const float s = sigmoid(in[0]);
    out[0] = in[1] * s * (1.0f + in[0] * (1.0f - s));
  }
};

struct SwiGluForward {
  static constexpr int kIn = 2, kOut = 1;  // gate, up -> out
  __device__ void operator()(const float (&in)[2], float (&out)[1]) const {
    out[0] = in[0] * sigmoid(in[0]) * in[1];
  }
};

struct SwiGluBackward {
  static constexpr int kIn = 3, kOut = 2;  // gate, up, dout -> dgate, dup
  __device__ void operator()(const float (&in)[3], float (&out)[2]) const {
    const float g = in[0];
    const float s = sigmoid(g);
    out[0] = in[2] * in[1] * s * (1.0f + g * (1.0f - s));
    out[1] = in[2] * g * s;
  }
};

template <class T, int N>
struct Ptrs {
  T* p[N];
};

// Element i (for V = 1) or pack i (V > 1) of every operand.
template <class T, int V, class Op>
__device__ __forceinline__ void apply(const Ptrs<const T, Op::kIn>& in, const Ptrs<T, Op::kOut>& out, long long i,
                                      Op op) {
  float a[Op::kIn][V];
#pragma unroll
  for (int k = 0; k < Op::kIn; ++k) load_floats<T, V>(in.p[k] + i * V, a[k]);
  float r[Op::kOut][V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    float ai[Op::kIn], ri[Op::kOut];
#pragma unroll
    for (int k = 0; k < Op::kIn; ++k) ai[k] = a[k][j];
    op(ai, ri);
#pragma unroll
    for (int k = 0; k < Op::kOut; ++k) r[k][j] = ri[k];
  }
#pragma unroll
  for (int k = 0; k < Op::kOut; ++k) store_floats<T, V>(out.p[k] + i * V, r[k]);
}

template <class T, int V, class Op>
__global__ void elementwise_kernel(Ptrs<const T, Op::kIn> in, Ptrs<T, Op::kOut> out, long long n, Op op) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long packs = n / V;
  for (long long i = first; i < packs; i += stride) apply<T, V>(in, out, i, op);
  for (long long i = packs * V + first; i < n; i += stride) apply<T, 1>(in, out, i, op);
}

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
  constexpr int threads = 256;
  const long long items = aligned ? n / V + n % V : n;
  const unsigned blocks = ceil_div(items, threads) < 65535u ? ceil_div(items, threads) : 65535u;
  if (aligned)
    elementwise_kernel<T, V, Op><<<blocks, threads, 0, to_cuda(stream)>>>(ip, op, n, Op{});
  else
    elementwise_kernel<T, 1, Op><<<blocks, threads, 0, to_cuda(stream)>>>(ip, op, n, Op{});
  IGNIS_CHECK_LAUNCH();
}

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
