#pragma once
// RMSNorm and LayerNorm over the last dimension, forward and backward.
// weight, bias, dweight and dbias have the dtype of x (a bf16 model keeps its norm weights in
// bf16); statistics and every sum are accumulated in fp32 and rounded once to the dtype.
// The backward passes recompute each row's statistics from x instead of taking saved ones:
// the row is read anyway, and the forward then has a single output.
// dweight and dbias are sums over rows reduced in a fixed order: results are deterministic.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

bool rmsnorm_supported(Device device, DType dtype);
bool layernorm_supported(Device device, DType dtype);

// y = x / sqrt(mean(x^2) + eps) * weight (Llama).
// x, y: [rows, dim]; weight: [dim]; all contiguous, same dtype and device; dim >= 1, eps >= 0.
void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y, float eps, Stream stream = {});
// x, dy, dx: [rows, dim]; weight, dweight: [dim].
void rmsnorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                      const Tensor& dweight, float eps, Stream stream = {});

// y = (x - mean) / sqrt(var + eps) * weight + bias, var biased (as torch).
// x, y: [rows, dim]; weight, bias: [dim]; all contiguous, same dtype and device; dim >= 1, eps >= 0.
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, float eps,
                       Stream stream = {});
// x, dy, dx: [rows, dim]; weight, dweight, dbias: [dim].
void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Tensor& dx,
                        const Tensor& dweight, const Tensor& dbias, float eps, Stream stream = {});

}  // namespace ignis
