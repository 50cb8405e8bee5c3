#pragma once
// Reference learned position embedding: plain loops in double precision.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

// x: [batch, seqlen, dim], table: [positions, dim], starts: [batch] (the first position of each
// sequence) -> x with table[starts[b] + s] added to token s of sequence b. A token whose position
// falls outside [0, positions) is left unchanged (the CUDA kernel's contract).
std::vector<double> position_embedding_add(std::span<const double> x, std::span<const double> table,
                                           std::span<const std::int64_t> starts, std::int64_t seqlen,
                                           std::int64_t dim);

}  // namespace ignis::ref
