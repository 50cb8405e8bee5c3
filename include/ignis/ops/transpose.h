#pragma once
// transpose: swaps the last two dimensions into a new contiguous tensor.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// Any dtype (the bytes move unchanged) on the CPU and on CUDA.
bool transpose_supported(Device device, DType dtype);
// x: [batch, rows, cols] -> y: [batch, cols, rows], or x: [rows, cols] -> y: [cols, rows];
// contiguous, same dtype and device.
void transpose(const Tensor& x, const Tensor& y, Stream stream = {});

}  // namespace ignis
