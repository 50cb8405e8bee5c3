#pragma once
// Small pieces the CPU forward passes of every model family share.
#include <cstdint>
#include <string>
#include <utility>

#include "ignis/device.h"
#include "ignis/error.h"
#include "ignis/tensor.h"

namespace ignis::engine {

// A Tensor over engine scratch memory, for the ops that take Tensors.
inline Tensor cpu_view(const float* data, Shape shape) {
  return Tensor::view(const_cast<float*>(data), DType::f32, Device::cpu(), std::move(shape));
}

// x += y, elementwise over n values (the residual connections).
inline void add_into(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// y: [rows, bias.size] += bias on every row.
inline void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) add_into(y + r * cols, bias, cols);
}

inline void require_cpu(const Device& device, const char* model) {
  if (!device.is_cpu())
    throw Error(std::string(model) + ": device: CUDA engine not built yet (expected cpu, got " + device.str() + ")");
}

}  // namespace ignis::engine
