#pragma once
// The engine's CPU learned position embedding: fp32.
#include <cstdint>

namespace ignis::cpu {

// x: [batch, seqlen, dim] += table rows starts[b] + s; table: [positions, dim]; starts: [batch],
// every position already checked to lie inside the table.
void position_embedding_add_f32(float* x, const float* table, const std::int64_t* starts, std::int64_t batch,
                                std::int64_t seqlen, std::int64_t dim);

}  // namespace ignis::cpu
