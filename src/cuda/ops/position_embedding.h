#pragma once
// CUDA learned position embedding launcher. Arguments are validated by the dispatcher in
// src/ops/position_embedding.cpp.
#include <cstdint>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// x: [batch, seqlen, dim] f32, f16 or bf16, updated in place; table: [positions, dim], x's dtype;
// batch_offsets: device int[batch] or null. A token whose position falls outside the table is
// left unchanged.
void position_embedding_add(const Tensor& x, const Tensor& table, std::int64_t position_offset,
                            const std::int32_t* batch_offsets, Stream stream);

}  // namespace ignis::cuda
