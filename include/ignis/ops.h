#pragma once
// The ops of ignis that run on the host and on CUDA devices. Each entry point validates its
// arguments (shapes, dtypes, devices, contiguity) and throws ignis::Error naming the problem,
// then dispatches on the tensors' device and dtype. `*_supported` answers whether a
// device/dtype pair has an implementation, so callers and tests can ask instead of catching.
// Outputs are passed as (non-owning) tensors that the op writes into.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// Element-wise conversion between floating dtypes (f64, f32, f16, bf16), rounding to nearest even.
// src, dst: same shape, contiguous, same device.
bool cast_supported(Device device, DType src, DType dst);
void cast(const Tensor& src, const Tensor& dst, Stream stream = {});

// Softmax over the last dimension, accumulated in fp32.
// A row whose inputs are all -inf outputs zeros (it has no visible element), never NaN.
// x, y: [rows, cols], contiguous, same dtype and device.
bool softmax_supported(Device device, DType dtype);
void softmax_forward(const Tensor& x, const Tensor& y, Stream stream = {});
// dx = y * (dy - sum(dy * y)) per row. y, dy, dx: [rows, cols].
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Stream stream = {});

}  // namespace ignis
