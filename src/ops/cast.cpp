// Cast dispatcher: element-wise conversion between floating dtypes on the host or a GPU.
#include "ignis/float16.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/cast.h"
#endif

namespace ignis {
namespace {

// Reads element i of a floating tensor as double, exactly.
// data: [n] of `dtype`.
double load_as_double(const void* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::f64: return static_cast<const double*>(data)[i];
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::f16: return f16_bits_to_float(static_cast<const std::uint16_t*>(data)[i]);
    case DType::bf16: return bf16_bits_to_float(static_cast<const std::uint16_t*>(data)[i]);
    default: return 0.0;
  }
}

// Stores v into element i; f16/bf16 round from float, as the GPU path does.
// data: [n] of `dtype`.
void store_from_double(void* data, DType dtype, std::int64_t i, double v) {
  switch (dtype) {
    case DType::f64: static_cast<double*>(data)[i] = v; break;
    case DType::f32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case DType::f16: static_cast<std::uint16_t*>(data)[i] = float_to_f16_bits(static_cast<float>(v)); break;
    case DType::bf16: static_cast<std::uint16_t*>(data)[i] = float_to_bf16_bits(static_cast<float>(v)); break;
    default: break;
  }
}

}  // namespace

bool cast_supported(Device device, DType src, DType dst) {
  if (!is_floating(src) || !is_floating(dst)) return false;
  return device.is_cpu() || IGNIS_WITH_CUDA;
}

void cast(const Tensor& src, const Tensor& dst, Stream stream) {
  constexpr const char* where = "cast";
  check_contiguous(src, where, "src");
  check_contiguous(dst, where, "dst");
  check_shape(dst, src.shape(), where, "dst");
  check_device(dst, src.device(), where, "dst");
  check_arg(cast_supported(src.device(), src.dtype(), dst.dtype()), where, "dtypes", "floating (f64, f32, f16, bf16)",
            detail::lazy_concat(src.dtype(), " -> ", dst.dtype()));
  if (src.device().is_cpu()) {
    for (std::int64_t i = 0; i < src.numel(); ++i)
      store_from_double(dst.data(), dst.dtype(), i, load_as_double(src.data(), src.dtype(), i));
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::cast(src, dst, stream);
#endif
}

}  // namespace ignis
