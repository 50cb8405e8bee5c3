#pragma once
// bf16-weight matrix-vector products with AVX2 and FMA. matvec_avx2.cpp alone is compiled with
// -mavx2 -mfma; call these only when cpu_has_avx2_fma() is true.
#include <cstdint>

namespace ignis::engine {

// Defined in linear.cpp: this file's own code may use AVX instructions anywhere.
bool cpu_has_avx2_fma();

// y[i * ldy + r] = sum_c w[r * cols + c] * x[i * cols + c] for r in [r0, r1), i in [0, m), m in [1, 4].
// w: [rows, cols] bf16 bits, x: [m, cols], y: [m, ldy].
void matvec_bf16_avx2(const std::uint16_t* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x,
                      std::int64_t m, float* y, std::int64_t ldy);

// The same for q8 weights: w: [rows, cols] int8, scales: [rows, ceil(cols / 32)], weight
// (r, c) = w[r * cols + c] * scales[r * blocks + c / 32].
void matvec_q8_avx2(const std::int8_t* w, const float* scales, std::int64_t cols, std::int64_t r0, std::int64_t r1,
                    const float* x, std::int64_t m, float* y, std::int64_t ldy);

}  // namespace ignis::engine
