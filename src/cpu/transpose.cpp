#include "cpu/transpose.h"

#include <algorithm>

namespace ignis::cpu {
namespace {

// 32 x 32 blocks keep both the rows read and the rows written in cache.
constexpr std::int64_t kBlock = 32;

// x: [batch, rows, cols] -> y: [batch, cols, rows].
template <class U>
void transpose_as(const U* x, U* y, std::int64_t batch, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t z = 0; z < batch; ++z) {
    const U* in = x + z * rows * cols;
    U* out = y + z * rows * cols;
    for (std::int64_t r0 = 0; r0 < rows; r0 += kBlock)
      for (std::int64_t c0 = 0; c0 < cols; c0 += kBlock) {
        const std::int64_t r1 = std::min(rows, r0 + kBlock), c1 = std::min(cols, c0 + kBlock);
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * cols + c];
      }
  }
}

}  // namespace

void transpose(const void* x, void* y, std::int64_t batch, std::int64_t rows, std::int64_t cols,
               std::size_t elem_size) {
  switch (elem_size) {
    case 1: return transpose_as(static_cast<const std::uint8_t*>(x), static_cast<std::uint8_t*>(y), batch, rows, cols);
    case 2:
      return transpose_as(static_cast<const std::uint16_t*>(x), static_cast<std::uint16_t*>(y), batch, rows, cols);
    case 4:
      return transpose_as(static_cast<const std::uint32_t*>(x), static_cast<std::uint32_t*>(y), batch, rows, cols);
    default:
      return transpose_as(static_cast<const std::uint64_t*>(x), static_cast<std::uint64_t*>(y), batch, rows, cols);
  }
}

}  // namespace ignis::cpu
