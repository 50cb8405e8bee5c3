#pragma once
// The weight matrices of linear layers on the CPU and the product y = x @ W^T.
//
// Decode reads every weight once per token, so its speed is the memory bandwidth divided by the
// weight bytes: bf16 storage halves the bytes of f32 (the bundled 135M model: ~270 MB instead
// of ~540 MB per token). Products of a few rows (decode) run an AVX2/FMA kernel that widens
// bf16 in registers; products of many rows (prefill) widen blocks of rows to f32 and call sgemm,
// where the widening costs little next to the arithmetic.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/thread_pool.h"

namespace ignis::engine {

enum class WeightFormat { f32, bf16 };
std::string weight_format_name(WeightFormat format);

// w: [rows = out features, cols = in features], row-major (one output's weights contiguous, as
// GGUF stores them).
class LinearWeight {
 public:
  LinearWeight() = default;
  // values: [rows, cols]; stored as `format` (bf16 rounds to nearest even).
  LinearWeight(const std::vector<float>& values, std::int64_t rows, std::int64_t cols, WeightFormat format);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  WeightFormat format() const { return format_; }
  std::size_t bytes() const;
  const float* f32_data() const { return f32_.data(); }
  const std::uint16_t* bf16_data() const { return bf16_.data(); }

  // out: [cols] = row r widened to f32 (an embedding lookup in a tied table).
  void row_to_f32(std::int64_t r, float* out) const;

 private:
  std::int64_t rows_ = 0, cols_ = 0;
  WeightFormat format_ = WeightFormat::f32;
  std::vector<float> f32_;
  std::vector<std::uint16_t> bf16_;
};

// x: [m, w.cols()], y: [m, w.rows()], contiguous, y not overlapping x. Output rows are split
// across the pool's threads.
void linear_forward(const LinearWeight& w, const float* x, float* y, std::int64_t m, ThreadPool& pool);

// Which kernels this build and CPU use: "avx2+fma" or "scalar", and "openblas" or "loops".
std::string linear_kernels_summary();

}  // namespace ignis::engine
