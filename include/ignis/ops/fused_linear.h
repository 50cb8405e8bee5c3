#pragma once
// Fused linear layers for decoding a few tokens: a matrix-vector product that reads each weight
// row once, with the RMSNorm before it, the residual add after it or the SwiGLU gate around two
// of them folded into the same kernel. For n up to 8 rows every weight is read from memory once;
// more rows are correct but re-read the weights every 8 rows (prefill belongs to a GEMM).
// Activations are f32 (the residual stream); weights bf16 or f32; all sums in fp32.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// CUDA only, for weight dtypes bf16 and f32.
bool fused_linear_supported(Device device, DType weight_dtype);

// y = (rmsnorm(x) * norm_weight) @ w^T, the normalised row kept in fp32 (never rounded to the
// weight dtype). x: [n, in] f32; norm_weight: [in] f32; w: [out, in] bf16 or f32; y: [n, out] f32.
// All contiguous, on one device; y must not overlap x. eps >= 0.
void rmsnorm_matvec(const Tensor& x, const Tensor& norm_weight, const Tensor& w, const Tensor& y, float eps,
                    Stream stream = {});

// y += x @ w^T (the residual add after an attention or FFN output projection).
// x: [n, in] f32 or bf16; w: [out, in] bf16 or f32; y: [n, out] f32, read and written; all
// contiguous, on one device; y must not overlap x.
void matvec_add(const Tensor& x, const Tensor& w, const Tensor& y, Stream stream = {});

// h = silu(xn @ w_gate^T) * (xn @ w_up^T), xn = rmsnorm(x) * norm_weight kept in fp32; gate and up
// are never stored. x: [n, in] f32; norm_weight: [in] f32; w_gate, w_up: [ffn, in], one dtype
// (bf16 or f32); h: [n, ffn] f32 or bf16. All contiguous, on one device; h must not overlap x.
void rmsnorm_swiglu_matvec(const Tensor& x, const Tensor& norm_weight, const Tensor& w_gate, const Tensor& w_up,
                           const Tensor& h, float eps, Stream stream = {});

}  // namespace ignis
