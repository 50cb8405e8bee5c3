#pragma once
// Reference softmax over the last dimension: plain loops in double precision.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

// x: [rows, cols] -> y: [rows, cols]. A row whose entries are all -inf gives zeros.
std::vector<double> softmax_forward(std::span<const double> x, std::int64_t rows, std::int64_t cols);

// y, dy: [rows, cols] -> dx = y * (dy - sum(dy * y)) per row: [rows, cols].
std::vector<double> softmax_backward(std::span<const double> y, std::span<const double> dy, std::int64_t rows,
                                     std::int64_t cols);

}  // namespace ignis::ref
