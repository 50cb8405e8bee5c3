#include "model/gguf_llama_permute.h"

#include <cstring>

#include "ignis/error.h"

namespace ignis::model {

namespace {

enum class Direction { to_hf, to_gguf };

std::size_t row_bytes(std::size_t total, std::int64_t n_heads, std::int64_t head_dim, const char* where) {
  check_arg(n_heads > 0, where, "n_heads", "> 0", n_heads);
  check_arg(head_dim > 0 && head_dim % 2 == 0, where, "head_dim", "a positive even number", head_dim);
  const auto rows = static_cast<std::size_t>(n_heads * head_dim);
  check_arg(total % rows == 0, where, "size", detail::concat("a multiple of ", rows, " rows"), total);
  return total / rows;
}

// src, dst: [n_heads * head_dim rows, bytes per row], raw bytes.
void move_rows(std::span<const std::byte> src, std::span<std::byte> dst, std::int64_t n_heads, std::int64_t head_dim,
               Direction direction, const char* where) {
  check_arg(dst.size() == src.size(), where, "dst size", src.size(), dst.size());
  const std::size_t bytes = row_bytes(src.size(), n_heads, head_dim, where);
  if (bytes == 0) return;  // empty rows: nothing to move, and the spans may be null
  for (std::int64_t head = 0; head < n_heads; ++head) {
    const std::size_t base = static_cast<std::size_t>(head * head_dim);
    for (std::int64_t h = 0; h < head_dim; ++h) {
      const std::size_t hf = base + static_cast<std::size_t>(h);
      const std::size_t gguf = base + static_cast<std::size_t>(gguf_row_of_hf_row(h, head_dim));
      const std::size_t from = direction == Direction::to_hf ? gguf : hf;
      const std::size_t to = direction == Direction::to_hf ? hf : gguf;
      std::memcpy(dst.data() + to * bytes, src.data() + from * bytes, bytes);
    }
  }
}

// w: [n_heads * head_dim, cols] -> [n_heads * head_dim, cols].
std::vector<float> move_float_rows(std::span<const float> w, std::int64_t n_heads, std::int64_t head_dim,
                                   Direction direction, const char* where) {
  (void)row_bytes(w.size(), n_heads, head_dim, where);  // reports sizes in floats, not bytes
  std::vector<float> out(w.size());
  move_rows(std::as_bytes(w), std::as_writable_bytes(std::span<float>(out)), n_heads, head_dim, direction, where);
  return out;
}

}  // namespace

std::int64_t gguf_row_of_hf_row(std::int64_t hf_row, std::int64_t head_dim) {
  const std::int64_t half_dim = head_dim / 2;
  return 2 * (hf_row % half_dim) + hf_row / half_dim;
}

void unpermute_qk_rows(std::span<const std::byte> src, std::span<std::byte> dst, std::int64_t n_heads,
                       std::int64_t head_dim) {
  move_rows(src, dst, n_heads, head_dim, Direction::to_hf, "unpermute_qk_rows");
}

void permute_qk_rows(std::span<const std::byte> src, std::span<std::byte> dst, std::int64_t n_heads,
                     std::int64_t head_dim) {
  move_rows(src, dst, n_heads, head_dim, Direction::to_gguf, "permute_qk_rows");
}

std::vector<float> unpermute_qk_rows(std::span<const float> w, std::int64_t n_heads, std::int64_t head_dim) {
  return move_float_rows(w, n_heads, head_dim, Direction::to_hf, "unpermute_qk_rows");
}

std::vector<float> permute_qk_rows(std::span<const float> w, std::int64_t n_heads, std::int64_t head_dim) {
  return move_float_rows(w, n_heads, head_dim, Direction::to_gguf, "permute_qk_rows");
}

}  // namespace ignis::model
