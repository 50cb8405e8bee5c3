#pragma once
// The RoPE angle of one position and pair: pos * inv_freq reduced to [-pi, pi] in double before
// sincosf, because at position 1e6 an fp32 product would be off by ~0.03 rad.
#include <cuda_runtime.h>

namespace ignis::cuda {

// 2*pi split into a double and the remainder, so k * 2*pi is subtracted with ~1e-16 relative
// error for the k ~ 1e5 turns of position 1e6.
constexpr double kTwoPiHi = 6.283185307179586;
constexpr double kTwoPiLo = 2.4492935982947064e-16;
constexpr double kInvTwoPi = 0.15915494309189535;

// pos * inv_freq is exact in double for pos < 2^29 (a 24-bit times a 29-bit significand).
// kFast: __sincosf, whose absolute error on the reduced angle (|t| <= pi) is ~2^-21, far below
// a 16-bit ulp, with none of sincosf's slow path for large arguments (for 16-bit outputs).
template <bool kFast = false>
__device__ __forceinline__ void angle_cos_sin(long long pos, float inv_freq, float& c, float& s) {
  const double angle = static_cast<double>(pos) * static_cast<double>(inv_freq);
  const double turns = rint(angle * kInvTwoPi);
  const double reduced = fma(-turns, kTwoPiLo, fma(-turns, kTwoPiHi, angle));
  if constexpr (kFast)
    __sincosf(static_cast<float>(reduced), &s, &c);
  else
    sincosf(static_cast<float>(reduced), &s, &c);
}

}  // namespace ignis::cuda
