#pragma once
// Learned position embeddings (GPT-2's wpe): each token's activations gain the table row of its
// position, in place.
//
// Token s of sequence b sits at position position_offset + batch_offsets[b] + s. The optional
// batch_offsets live on x's device (the KV cache's device lengths), so a decode step needs no
// host-to-device copy of its position and can be replayed from a CUDA graph.
#include <cstdint>
#include <optional>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// f32 on the CPU; f32, f16 and bf16 on CUDA.
bool position_embedding_supported(Device device, DType dtype);

// x[b, s, :] += table[position_offset + batch_offsets[b] + s, :], the sum in fp32.
// x: [batch, seqlen, dim]; table: [positions, dim], x's dtype and device; both contiguous.
// batch_offsets: [batch] i32 on x's device, contiguous (absent: all 0).
// Throws ignis::Error for position_offset < 0 and, without batch_offsets, for
// position_offset + seqlen > positions. With batch_offsets a position outside [0, positions)
// throws on the CPU (before anything is written); on CUDA it cannot be seen without a sync, and
// that token is left unchanged rather than read out of bounds (the caller checks its host copy).
void position_embedding_add(const Tensor& x, const Tensor& table, std::int64_t position_offset,
                            const std::optional<Tensor>& batch_offsets = std::nullopt, Stream stream = {});

}  // namespace ignis
