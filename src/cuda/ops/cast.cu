// Element-wise conversion between floating storage types on the GPU. Every conversion goes
// through float (f64 -> f16/bf16 rounds to f32 first), exactly as the host path does.
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/ops/cast.h"

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

template <class Dst, class Src>
__global__ void cast_kernel(const Src* __restrict__ src, Dst* __restrict__ dst, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    dst[i] = convert<Dst>(src[i]);
}

template <class Dst, class Src>
void launch(const Tensor& src, const Tensor& dst, Stream stream) {
  const long long n = src.numel();
  if (n == 0) return;
  constexpr int threads = 256;
  const unsigned blocks = ceil_div(n, threads) < 65535u ? ceil_div(n, threads) : 65535u;
  cast_kernel<Dst, Src><<<blocks, threads, 0, to_cuda(stream)>>>(src.data_as<const Src>(), dst.data_as<Dst>(), n);
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
