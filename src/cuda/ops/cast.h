#pragma once
// CUDA element-wise dtype conversion. Arguments are validated by src/ops/cast.cpp.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// src, dst: same shape, contiguous; floating dtypes f64/f32/f16/bf16.
void cast(const Tensor& src, const Tensor& dst, Stream stream);

}  // namespace ignis::cuda
