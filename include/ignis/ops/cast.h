#pragma once
// cast: element-wise conversion between floating dtypes.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// Element-wise conversion between floating dtypes (f64, f32, f16, bf16), rounding to nearest even.
// src, dst: same shape, contiguous, same device.
bool cast_supported(Device device, DType src, DType dst);
void cast(const Tensor& src, const Tensor& dst, Stream stream = {});

}  // namespace ignis
