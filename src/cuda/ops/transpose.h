#pragma once
// CUDA transpose launcher. Arguments are validated by the dispatcher in src/ops/transpose.cpp.
#include <cstdint>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// x: [batch, rows, cols] -> y: [batch, cols, rows], contiguous, any dtype.
void transpose(const Tensor& x, const Tensor& y, std::int64_t batch, std::int64_t rows, std::int64_t cols,
               Stream stream);

}  // namespace ignis::cuda
