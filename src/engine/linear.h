#pragma once
// The weight matrices of linear layers on the CPU and the product y = x @ W^T.
//
// Decode reads every weight once per token, so its speed is the memory bandwidth divided by the
// weight bytes. For the bundled 135M model: f32 ~540 MB per token, bf16 ~270 MB, q8 ~150 MB
// (int8 with one f32 scale per block of 32 weights along the row, like ggml's Q8_0: each weight
// moves by at most half a step, 1/254 of its block's largest magnitude). Products of a few rows (decode) run AVX2/FMA
// kernels that widen the weights in registers; products of many rows (prefill) widen blocks of rows to f32 and call
// sgemm, where the widening costs little next to the arithmetic.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/thread_pool.h"

namespace ignis::engine {

enum class WeightFormat { f32, bf16, q8 };
std::string weight_format_name(WeightFormat format);
// "f32", "bf16" or "q8"; throws ignis::Error for another name.
WeightFormat parse_weight_format(const std::string& name);
// Weights per q8 scale.
constexpr std::int64_t kQ8Block = 32;

// w: [rows = out features, cols = in features], row-major (one output's weights contiguous, as
// GGUF stores them).
class LinearWeight {
 public:
  LinearWeight() = default;
  // values: [rows, cols]; stored as `format` (bf16 rounds to nearest even; q8 rounds
  // value / scale to nearest, scale = the block's largest magnitude / 127).
  LinearWeight(const std::vector<float>& values, std::int64_t rows, std::int64_t cols, WeightFormat format);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  WeightFormat format() const { return format_; }
  std::size_t bytes() const;
  const float* f32_data() const { return f32_.data(); }
  const std::uint16_t* bf16_data() const { return bf16_.data(); }
  const std::int8_t* q8_data() const { return q8_.data(); }       // [rows, cols]
  const float* q8_scales() const { return q8_scales_.data(); }    // [rows, ceil(cols / kQ8Block)]

  // out: [cols] = row r widened to f32 (an embedding lookup in a tied table).
  void row_to_f32(std::int64_t r, float* out) const;

 private:
  void quantize_q8(const std::vector<float>& values);

  std::int64_t rows_ = 0, cols_ = 0;
  WeightFormat format_ = WeightFormat::f32;
  std::vector<float> f32_;
  std::vector<std::uint16_t> bf16_;
  std::vector<std::int8_t> q8_;
  std::vector<float> q8_scales_;
};

// x: [m, w.cols()], y: [m, w.rows()], contiguous, y not overlapping x. Output rows are split
// across the pool's threads.
void linear_forward(const LinearWeight& w, const float* x, float* y, std::int64_t m, ThreadPool& pool);

// A weight stored in q8: the f32 value of (row, col).
float q8_value(const LinearWeight& w, std::int64_t row, std::int64_t col);

// Which kernels this build and CPU use: "avx2+fma" or "scalar", and "openblas" or "loops".
std::string linear_kernels_summary();

}  // namespace ignis::engine
