#pragma once
// Element-wise activations, forward and backward: GELU (tanh form, GPT-2's gelu_new), SiLU and
// SwiGLU. Computed in fp32 whatever the storage dtype. Every tensor of one call has the same
// shape (any rank), dtype and device, and is contiguous.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// Whether every op of this header runs on (device, dtype).
bool activation_supported(Device device, DType dtype);

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). x, y: [n...].
void gelu_tanh_forward(const Tensor& x, const Tensor& y, Stream stream = {});
// dx = dy * gelu'(x). x, dy, dx: [n...].
void gelu_tanh_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, Stream stream = {});

// y = x * sigmoid(x). x, y: [n...].
void silu_forward(const Tensor& x, const Tensor& y, Stream stream = {});
// dx = dy * silu'(x). x, dy, dx: [n...].
void silu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, Stream stream = {});

// out = silu(gate) * up. gate, up, out: [rows, dim] (any shape, all equal).
void swiglu_forward(const Tensor& gate, const Tensor& up, const Tensor& out, Stream stream = {});
// dgate = dout * up * silu'(gate), dup = dout * silu(gate). All five: the shape of gate.
void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup, Stream stream = {});

}  // namespace ignis
