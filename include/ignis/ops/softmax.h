#pragma once
// softmax forward and backward over the last dimension.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// Softmax over the last dimension, accumulated in fp32.
// A row whose inputs are all -inf outputs zeros (it has no visible element), never NaN.
// x, y: [rows, cols], contiguous, same dtype and device.
bool softmax_supported(Device device, DType dtype);
void softmax_forward(const Tensor& x, const Tensor& y, Stream stream = {});
// dx = y * (dy - sum(dy * y)) per row. y, dy, dx: [rows, cols].
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Stream stream = {});

}  // namespace ignis
