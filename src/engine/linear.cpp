#include "engine/linear.h"

#include <algorithm>

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

// Output rows [r0, r1) of a bf16 weight for many activation rows: widen, then sgemm.
void gemm_bf16_widened(const LinearWeight& w, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m,
                       float* y) {
  const std::int64_t cols = w.cols();
  thread_local std::vector<float> block;
  block.resize(static_cast<std::size_t>(kWidenRows * cols));
  for (std::int64_t r = r0; r < r1; r += kWidenRows) {
    const std::int64_t n = std::min(kWidenRows, r1 - r);
    const std::uint16_t* src = w.bf16_data() + r * cols;
    for (std::int64_t e = 0; e < n * cols; ++e) block[static_cast<std::size_t>(e)] = bf16_bits_to_float(src[e]);
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

std::string weight_format_name(WeightFormat format) { return format == WeightFormat::f32 ? "f32" : "bf16"; }

LinearWeight::LinearWeight(const std::vector<float>& values, std::int64_t rows, std::int64_t cols, WeightFormat format)
    : rows_(rows), cols_(cols), format_(format) {
  check_arg(rows > 0 && cols > 0, "LinearWeight", "shape", "positive rows and cols",
            std::to_string(rows) + " x " + std::to_string(cols));
  check_arg(values.size() == static_cast<std::size_t>(rows * cols), "LinearWeight", "values.size",
            rows * cols, values.size());
  if (format == WeightFormat::f32) {
    f32_ = values;
  } else {
    bf16_.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) bf16_[i] = float_to_bf16_bits(values[i]);
  }
}

std::size_t LinearWeight::bytes() const { return f32_.size() * sizeof(float) + bf16_.size() * sizeof(std::uint16_t); }

void LinearWeight::row_to_f32(std::int64_t r, float* out) const {
  if (format_ == WeightFormat::f32) {
    std::copy_n(f32_.data() + r * cols_, cols_, out);
  } else {
    const std::uint16_t* row = bf16_.data() + r * cols_;
    for (std::int64_t c = 0; c < cols_; ++c) out[c] = bf16_bits_to_float(row[c]);
  }
}

void linear_forward(const LinearWeight& w, const float* x, float* y, std::int64_t m, ThreadPool& pool) {
  if (m <= 0) return;
  const std::int64_t rows = w.rows(), cols = w.cols();
  // Rows in multiples of 16 keep each thread's output a whole number of cache lines.
  pool.parallel_for(rows, 16, [&](std::int64_t r0, std::int64_t r1) {
    if (w.format() == WeightFormat::f32) return gemm_rows_f32(w.f32_data() + r0 * cols, r1 - r0, cols, x, m, y + r0, rows);
    if (m > kMatvecMaxRows) return gemm_bf16_widened(w, r0, r1, x, m, y);
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
