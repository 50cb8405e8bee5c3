#pragma once
// CUDA cross-entropy launcher. Arguments are validated by src/ops/cross_entropy.cpp; targets are
// checked on the device (a bad one's row is treated as pad and recorded).
#include <cstdint>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// logits: [n, vocab] f32/f16/bf16; targets: [n] i32/i64; loss: [1] f32; dlogits: [n, vocab] or
// undefined; row_loss: [n] f32 or undefined; flag: device long long[3] (index_flag.cuh), where a bad
// target is recorded (its row counts as pad). Does not synchronize.
void cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                   const Tensor& dlogits, const Tensor& row_loss, long long* flag, Stream stream);
// The same with a scratch flag; synchronizes and returns whether a target was out of range.
bool cross_entropy_checked(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                           const Tensor& dlogits, const Tensor& row_loss, Stream stream);

}  // namespace ignis::cuda
