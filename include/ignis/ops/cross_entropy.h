#pragma once
// Cross-entropy of logits against integer targets, forward and backward in one pass.
#include <cstdint>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// `dtype` is the logits': f32 on the host; f32, f16 or bf16 on CUDA. Targets are i32 or i64.
bool cross_entropy_supported(Device device, DType dtype);

// loss = mean over rows with targets[i] != pad_id of logsumexp(logits[i]) - logits[i][targets[i]],
// accumulated in fp32 (the mean over rows in fp64); 0 when every row is pad.
// dlogits = (softmax(logits[i]) - onehot(targets[i])) / (number of non-pad rows), 0 on pad rows.
// logits: [n, vocab]; targets: [n] i32/i64; loss: [1] f32; dlogits: [n, vocab] (logits' dtype) or an
// undefined Tensor to skip the gradient, and may be `logits` itself (in place); row_loss: [n] f32 (0 on
// pad rows) or undefined. All contiguous on one device. A target other than pad_id outside [0, vocab)
// throws ignis::Error; on CUDA it is found on the device, and the call waits for the stream to check: one
// synchronization.
void cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                   const Tensor& dlogits, const Tensor& row_loss = {}, Stream stream = {});

// The same without the synchronization, for a training step that must not wait on the GPU (as
// torch's): a target other than pad_id outside [0, vocab) makes its row count as pad (loss and
// gradient 0, left out of the mean) and is recorded in `flag` (the first one recorded wins), to be
// read later by cross_entropy_check_flag. With valid targets the results equal cross_entropy's.
// flag: [3] i64 on the logits' device, {position, target, vocab}, position -1 meaning none;
// cross_entropy_clear_flag sets it, and it may collect any number of calls before a check.
void cross_entropy_deferred(const Tensor& logits, const Tensor& targets, std::int64_t pad_id, const Tensor& loss,
                            const Tensor& dlogits, const Tensor& flag, const Tensor& row_loss = {},
                            Stream stream = {});
void cross_entropy_clear_flag(const Tensor& flag, Stream stream = {});
// Waits for `stream`, then throws the error cross_entropy would have thrown if a bad target was recorded.
void cross_entropy_check_flag(const Tensor& flag, Stream stream = {});

}  // namespace ignis
