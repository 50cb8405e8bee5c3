// Element-wise conversion between floating storage types on the GPU. Every conversion goes
// through float (f64 -> f16/bf16 rounds to f32 first), exactly as the host path does.
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/ops/cast.h"

#include <algorithm>

namespace ignis::cuda {
namespace {

template <class Dst, class Src>
__device__ __forceinline__ Dst convert(Src v) {
  return from_float<Dst>(to_float(v));
}
template <>
__device__ __forceinline__ double convert<double, double>(double v) { return v; }
template <>
__device__ __forceinline__ double convert<double, float>(float v) { return v; }
template <>
__device__ __forceinline__ double convert<double, __half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ double convert<double, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float convert<float, double>(double v) { return __double2float_rn(v); }

// V elements per step: 16 bytes of the wider type per thread when both pointers allow it.
template <class Dst, class Src, int V>
__global__ void cast_kernel(const Src* __restrict__ src, Dst* __restrict__ dst, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x * V;
  for (long long i = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) * V; i < n; i += stride) {
    if (V > 1 && i + V <= n) {
      const Pack<Src, V> in = *reinterpret_cast<const Pack<Src, V>*>(src + i);
      Pack<Dst, V> out;
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = convert<Dst>(in.v[j]);
      *reinterpret_cast<Pack<Dst, V>*>(dst + i) = out;
    } else {
      for (long long j = i; j < n && j < i + V; ++j) dst[j] = convert<Dst>(src[j]);
    }
  }
}

template <class Dst, class Src>
void launch(const Tensor& src, const Tensor& dst, Stream stream) {
  const long long n = src.numel();
  if (n == 0) return;
  constexpr int V = 16 / (sizeof(Src) > sizeof(Dst) ? sizeof(Src) : sizeof(Dst));
  constexpr int threads = 256;
  const Src* in = src.data_as<const Src>();
  Dst* out = dst.data_as<Dst>();
  const bool vectorized = pack_aligned<Src, V>(in) && pack_aligned<Dst, V>(out);
  // Enough blocks to fill the GPU several times over; the loop strides across the rest.
  const long long steps = vectorized ? (n + V - 1) / V : n;
  const unsigned blocks = static_cast<unsigned>(std::min<long long>(ceil_div(steps, threads), 16LL * sm_count()));
  if (vectorized)
    cast_kernel<Dst, Src, V><<<blocks, threads, 0, to_cuda(stream)>>>(in, out, n);
  else
    cast_kernel<Dst, Src, 1><<<blocks, threads, 0, to_cuda(stream)>>>(in, out, n);
  IGNIS_CHECK_LAUNCH();
}

template <class Src>
void launch_from(const Tensor& src, const Tensor& dst, Stream stream) {
  switch (dst.dtype()) {
    case DType::f64: return launch<double, Src>(src, dst, stream);
    case DType::f32: return launch<float, Src>(src, dst, stream);
    case DType::f16: return launch<__half, Src>(src, dst, stream);
    case DType::bf16: return launch<__nv_bfloat16, Src>(src, dst, stream);
    default: fail_expected("cast", "dst.dtype", "f64, f32, f16 or bf16", dst.dtype());
  }
}

}  // namespace

void cast(const Tensor& src, const Tensor& dst, Stream stream) {
  switch (src.dtype()) {
    case DType::f64: return launch_from<double>(src, dst, stream);
    case DType::f32: return launch_from<float>(src, dst, stream);
    case DType::f16: return launch_from<__half>(src, dst, stream);
    case DType::bf16: return launch_from<__nv_bfloat16>(src, dst, stream);
    default: fail_expected("cast", "src.dtype", "f64, f32, f16 or bf16", src.dtype());
  }
}

}  // namespace ignis::cuda
