#pragma once
// Overflow-checked unsigned arithmetic for sizes read from untrusted model files: a hostile
// header must produce an error, never a wrapped size that passes a later bounds check.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace ignis::model {

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Rounds `value` up to a multiple of `alignment` (a power of two), or nullopt on overflow.
inline std::optional<std::uint64_t> checked_align_up(std::uint64_t value, std::uint64_t alignment) {
  const auto bumped = checked_add(value, alignment - 1);
  if (!bumped) return std::nullopt;
  return *bumped & ~(alignment - 1);
}

// True when [offset, offset + length) lies inside [0, size).
inline bool range_fits(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

// The start of the first range that overlaps another, among non-empty [begin, end) ranges.
inline std::optional<std::uint64_t> first_overlap(std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) return ranges[i].first;
  return std::nullopt;
}

}  // namespace ignis::model
