#include "engine/matvec_avx2.h"

#include <immintrin.h>

namespace ignis::engine {

namespace {

// bf16 is the top half of an f32: widen 8 values by zero-extending and shifting left 16 bits.
// p: [8] bf16 bits.
inline __m256 load_bf16x8(const std::uint16_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// M activation rows share each weight load; U independent accumulators per row hide FMA latency.
// w: [rows, cols] bf16 bits, x: [M, cols], y: [M, ldy].
template <int M, int U>
void rows_kernel(const std::uint16_t* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x,
                 float* y, std::int64_t ldy) {
  constexpr std::int64_t kStep = 8 * U;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::uint16_t* row = w + r * cols;
    __m256 acc[M][U];
    for (int i = 0; i < M; ++i)
      for (int u = 0; u < U; ++u) acc[i][u] = _mm256_setzero_ps();
    std::int64_t c = 0;
    for (; c + kStep <= cols; c += kStep) {
      for (int u = 0; u < U; ++u) {
        const __m256 wv = load_bf16x8(row + c + 8 * u);
        for (int i = 0; i < M; ++i)
          acc[i][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * cols + c + 8 * u), acc[i][u]);
      }
    }
    for (; c + 8 <= cols; c += 8) {
      const __m256 wv = load_bf16x8(row + c);
      for (int i = 0; i < M; ++i) acc[i][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * cols + c), acc[i][0]);
    }
    for (int i = 0; i < M; ++i) {
      for (int u = 1; u < U; ++u) acc[i][0] = _mm256_add_ps(acc[i][0], acc[i][u]);
      float sum = hsum(acc[i][0]);
      for (std::int64_t t = c; t < cols; ++t) {
        const std::uint32_t bits = static_cast<std::uint32_t>(row[t]) << 16;
        float wt;
        __builtin_memcpy(&wt, &bits, 4);
        sum += wt * x[i * cols + t];
      }
      y[i * ldy + r] = sum;
    }
  }
}

// q8: each block of 32 weights is widened and multiplied by its scale in registers, then
// accumulated in U independent chains per activation row (fewer for more rows: registers).
// w: [rows, cols] int8, scales: [rows, ceil(cols / 32)], x: [M, cols], y: [M, ldy].
template <int M, int U = (M == 1 ? 4 : 2)>
void q8_rows_kernel(const std::int8_t* w, const float* scales, std::int64_t cols, std::int64_t r0, std::int64_t r1,
                    const float* x, float* y, std::int64_t ldy) {
  const std::int64_t blocks = (cols + 31) / 32;
  const std::int64_t full = cols / 32;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int8_t* row = w + r * cols;
    const float* row_scales = scales + r * blocks;
    __m256 acc[M][U];
    for (int i = 0; i < M; ++i)
      for (int u = 0; u < U; ++u) acc[i][u] = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < full; ++b) {
      const __m256 scale = _mm256_set1_ps(row_scales[b]);
      const std::int64_t c = b * 32;
      for (int u = 0; u < 4; ++u) {
        const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c + 8 * u));
        const __m256 wv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw)), scale);
        for (int i = 0; i < M; ++i)
          acc[i][u % U] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * cols + c + 8 * u), acc[i][u % U]);
      }
    }
    for (int i = 0; i < M; ++i) {
      for (int u = 1; u < U; ++u) acc[i][0] = _mm256_add_ps(acc[i][0], acc[i][u]);
      float sum = hsum(acc[i][0]);
      for (std::int64_t t = full * 32; t < cols; ++t)
        sum += static_cast<float>(row[t]) * row_scales[t / 32] * x[i * cols + t];
      y[i * ldy + r] = sum;
    }
  }
}

}  // namespace

void matvec_q8_avx2(const std::int8_t* w, const float* scales, std::int64_t cols, std::int64_t r0, std::int64_t r1,
                    const float* x, std::int64_t m, float* y, std::int64_t ldy) {
  switch (m) {
    case 1: return q8_rows_kernel<1>(w, scales, cols, r0, r1, x, y, ldy);
    case 2: return q8_rows_kernel<2>(w, scales, cols, r0, r1, x, y, ldy);
    case 3: return q8_rows_kernel<3>(w, scales, cols, r0, r1, x, y, ldy);
    default: return q8_rows_kernel<4>(w, scales, cols, r0, r1, x, y, ldy);
  }
}

void matvec_bf16_avx2(const std::uint16_t* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x,
                      std::int64_t m, float* y, std::int64_t ldy) {
  switch (m) {
    case 1: return rows_kernel<1, 4>(w, cols, r0, r1, x, y, ldy);
    case 2: return rows_kernel<2, 2>(w, cols, r0, r1, x, y, ldy);
    case 3: return rows_kernel<3, 2>(w, cols, r0, r1, x, y, ldy);
    default: return rows_kernel<4, 2>(w, cols, r0, r1, x, y, ldy);
  }
}

}  // namespace ignis::engine
