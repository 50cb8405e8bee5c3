#pragma once
// Reference batched transpose of the last two dimensions.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

// x: [batch, rows, cols] -> [batch, cols, rows].
std::vector<double> transpose(std::span<const double> x, std::int64_t batch, std::int64_t rows, std::int64_t cols);

}  // namespace ignis::ref
