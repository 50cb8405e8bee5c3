#pragma once
// The engine's CPU transpose of the last two dimensions, for elements of any size.
#include <cstddef>
#include <cstdint>

namespace ignis::cpu {

// x: [batch, rows, cols] -> y: [batch, cols, rows], contiguous; elements of `elem_size` bytes.
void transpose(const void* x, void* y, std::int64_t batch, std::int64_t rows, std::int64_t cols,
               std::size_t elem_size);

}  // namespace ignis::cpu
