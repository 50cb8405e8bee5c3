#include "engine/linear.h"

#include <algorithm>
#include <cmath>

#include "engine/matvec_avx2.h"
#include "ignis/error.h"
#include "ignis/float16.h"

#if IGNIS_WITH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

namespace ignis::engine {
namespace {

// Up to this many activation rows, the matvec kernel (weights read once for all rows) beats
// widening the weights for sgemm.
constexpr std::int64_t kMatvecMaxRows = 4;
// Rows of a bf16 weight widened at a time for sgemm: 64 rows of 4096 floats stay in L2.
constexpr std::int64_t kWidenRows = 64;

#if IGNIS_WITH_OPENBLAS
// The engine splits work across its own threads; OpenBLAS threads would compete with them.
void single_threaded_blas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}
#endif

// y[i * ldy + r] = sum_c w[r * cols + c] * x[i * cols + c], r in [0, n), i in [0, m).
// w: [n, cols] f32.
void gemm_rows_f32(const float* w, std::int64_t n, std::int64_t cols, const float* x, std::int64_t m, float* y,
                   std::int64_t ldy) {
#if IGNIS_WITH_OPENBLAS
  single_threaded_blas();
  const auto M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(cols);
  if (m == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w, K, x, 1, 0.0f, y, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, y,
                static_cast<int>(ldy));
#else
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t r = 0; r < n; ++r) {
      const float* wr = w + r * cols;
      const float* xi = x + i * cols;
      float sum = 0.0f;
      for (std::int64_t c = 0; c < cols; ++c) sum += wr[c] * xi[c];
      y[i * ldy + r] = sum;
    }
#endif
}

// w: [rows, cols] bf16 bits, x: [m, cols], y: [m, ldy] (as matvec_bf16_avx2).
void matvec_bf16_scalar(const std::uint16_t* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x,
                        std::int64_t m, float* y, std::int64_t ldy) {
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t i = 0; i < m; ++i) {
      const std::uint16_t* wr = w + r * cols;
      const float* xi = x + i * cols;
      float sum = 0.0f;
      for (std::int64_t c = 0; c < cols; ++c) sum += bf16_bits_to_float(wr[c]) * xi[c];
      y[i * ldy + r] = sum;
    }
}

// x: [m, w.cols()], y: [m, w.rows()].
void matvec_q8_scalar(const LinearWeight& w, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m,
                      float* y) {
  const std::int64_t cols = w.cols(), blocks = (cols + kQ8Block - 1) / kQ8Block;
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t i = 0; i < m; ++i) {
      const std::int8_t* wr = w.q8_data() + r * cols;
      const float* scales = w.q8_scales() + r * blocks;
      const float* xi = x + i * cols;
      float sum = 0.0f;
      for (std::int64_t c = 0; c < cols; ++c) sum += static_cast<float>(wr[c]) * scales[c / kQ8Block] * xi[c];
      y[i * w.rows() + r] = sum;
    }
}

// Output rows [r0, r1) of a bf16 or q8 weight for many activation rows: widen, then sgemm.
void gemm_widened(const LinearWeight& w, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m, float* y) {
  const std::int64_t cols = w.cols();
  thread_local std::vector<float> block;
  block.resize(static_cast<std::size_t>(kWidenRows * cols));
  for (std::int64_t r = r0; r < r1; r += kWidenRows) {
    const std::int64_t n = std::min(kWidenRows, r1 - r);
    for (std::int64_t j = 0; j < n; ++j) w.row_to_f32(r + j, block.data() + j * cols);
    gemm_rows_f32(block.data(), n, cols, x, m, y + r, w.rows());
  }
}

}  // namespace

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

std::string weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::f32: return "f32";
    case WeightFormat::bf16: return "bf16";
    case WeightFormat::q8: return "q8";
  }
  return "unknown";
}

WeightFormat parse_weight_format(const std::string& name) {
  for (const WeightFormat f : {WeightFormat::f32, WeightFormat::bf16, WeightFormat::q8})
    if (weight_format_name(f) == name) return f;
  fail_expected("weight format", "name", "f32, bf16 or q8", name);
}

LinearWeight::LinearWeight(const std::vector<float>& values, std::int64_t rows, std::int64_t cols, WeightFormat format)
    : rows_(rows), cols_(cols), format_(format) {
  check_arg(rows > 0 && cols > 0, "LinearWeight", "shape", "positive rows and cols",
            std::to_string(rows) + " x " + std::to_string(cols));
  check_arg(values.size() == static_cast<std::size_t>(rows * cols), "LinearWeight", "values.size",
            rows * cols, values.size());
  if (format == WeightFormat::f32) {
    f32_ = values;
  } else if (format == WeightFormat::bf16) {
    bf16_.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) bf16_[i] = float_to_bf16_bits(values[i]);
  } else {
    quantize_q8(values);
  }
}

void LinearWeight::quantize_q8(const std::vector<float>& values) {
  const std::int64_t blocks = (cols_ + kQ8Block - 1) / kQ8Block;
  q8_.resize(values.size());
  q8_scales_.resize(static_cast<std::size_t>(rows_ * blocks));
  for (std::int64_t r = 0; r < rows_; ++r)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t c0 = r * cols_ + b * kQ8Block, c1 = r * cols_ + std::min(cols_, (b + 1) * kQ8Block);
      float amax = 0.0f;
      for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::abs(values[static_cast<std::size_t>(c)]));
      check_arg(std::isfinite(amax), "LinearWeight", "values", "finite values for q8", amax);
      const float scale = amax / 127.0f;
      q8_scales_[static_cast<std::size_t>(r * blocks + b)] = scale;
      for (std::int64_t c = c0; c < c1; ++c) {
        const float q = scale > 0.0f ? std::nearbyint(values[static_cast<std::size_t>(c)] / scale) : 0.0f;
        q8_[static_cast<std::size_t>(c)] = static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
      }
    }
}

std::size_t LinearWeight::bytes() const {
  return f32_.size() * sizeof(float) + bf16_.size() * sizeof(std::uint16_t) + q8_.size() +
         q8_scales_.size() * sizeof(float);
}

float q8_value(const LinearWeight& w, std::int64_t row, std::int64_t col) {
  const std::int64_t blocks = (w.cols() + kQ8Block - 1) / kQ8Block;
  return static_cast<float>(w.q8_data()[row * w.cols() + col]) * w.q8_scales()[row * blocks + col / kQ8Block];
}

void LinearWeight::row_to_f32(std::int64_t r, float* out) const {
  if (format_ == WeightFormat::f32) {
    std::copy_n(f32_.data() + r * cols_, cols_, out);
  } else if (format_ == WeightFormat::bf16) {
    const std::uint16_t* row = bf16_.data() + r * cols_;
    for (std::int64_t c = 0; c < cols_; ++c) out[c] = bf16_bits_to_float(row[c]);
  } else {
    const std::int64_t blocks = (cols_ + kQ8Block - 1) / kQ8Block;
    const std::int8_t* row = q8_.data() + r * cols_;
    const float* scales = q8_scales_.data() + r * blocks;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t end = std::min(cols_, (b + 1) * kQ8Block);
      for (std::int64_t c = b * kQ8Block; c < end; ++c) out[c] = static_cast<float>(row[c]) * scales[b];
    }
  }
}

void linear_forward(const LinearWeight& w, const float* x, float* y, std::int64_t m, ThreadPool& pool) {
  if (m <= 0) return;
  const std::int64_t rows = w.rows(), cols = w.cols();
  // Rows in multiples of 16 keep each thread's output a whole number of cache lines.
  pool.parallel_for(rows, 16, [&](std::int64_t r0, std::int64_t r1) {
    if (w.format() == WeightFormat::f32)
      return gemm_rows_f32(w.f32_data() + r0 * cols, r1 - r0, cols, x, m, y + r0, rows);
    if (m > kMatvecMaxRows) return gemm_widened(w, r0, r1, x, m, y);
    if (w.format() == WeightFormat::q8) {
      if (cpu_has_avx2_fma()) return matvec_q8_avx2(w.q8_data(), w.q8_scales(), cols, r0, r1, x, m, y, rows);
      return matvec_q8_scalar(w, r0, r1, x, m, y);
    }
    if (cpu_has_avx2_fma()) return matvec_bf16_avx2(w.bf16_data(), cols, r0, r1, x, m, y, rows);
    matvec_bf16_scalar(w.bf16_data(), cols, r0, r1, x, m, y, rows);
  });
}

std::string linear_kernels_summary() {
  std::string s = cpu_has_avx2_fma() ? "avx2+fma" : "scalar";
  s += IGNIS_WITH_OPENBLAS ? ", openblas" : ", loops";
  return s;
}

}  // namespace ignis::engine
