#pragma once
// The CUDA attention backend: the naive attention kernel over the KV cache read in place, with
// each sequence's length read on the device (AttentionBatch::device_kv_lengths, required), so a
// decode step replays from a CUDA graph at any length. f32 (the kernel's dtypes: f32, f64).
#include <memory>

#include "engine/attention_backend.h"

namespace ignis::engine {

std::unique_ptr<AttentionBackend> make_cuda_attention();

}  // namespace ignis::engine
