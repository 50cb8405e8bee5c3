#pragma once
// The CUDA attention backend over the KV cache read in place, with each sequence's length read on
// the device (AttentionBatch::device_kv_lengths, required), so a decode step replays from a CUDA
// graph at any length. Prefill runs the naive kernel (f32, f64); decode runs the split-K kernel
// (attention_decode_forward: f32, f16, bf16) where it supports the dtype, else the naive one.
#include <memory>

#include "engine/attention_backend.h"

namespace ignis::engine {

std::unique_ptr<AttentionBackend> make_cuda_attention();

}  // namespace ignis::engine
