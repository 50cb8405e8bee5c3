#pragma once
// Conversions between the storage types (float, half, bf16, double) and float arithmetic,
// and 16-byte vector loads/stores of any of them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ignis::cuda {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(double v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ double from_float<double>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// V elements of T packed into one aligned load/store (16 bytes when V = 16 / sizeof(T)).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// A pack's elements as floats. bf16 pairs convert by 32-bit word: the low element is the word
// shifted up, the high one the word with its low half cleared (one instruction each; element by
// element the compiler extracts the high half first, two instructions). The pack is taken by value:
// one 16-byte load where the caller passes memory (by reference the words were loaded one by one).
template <class T, int V>
__device__ __forceinline__ void to_floats(const Pack<T, V> pack, float (&dst)[V]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> && V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      std::uint32_t word;
      memcpy(&word, &pack.v[i], sizeof(word));
      dst[i] = __uint_as_float(word << 16);
      dst[i + 1] = __uint_as_float(word & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) dst[i] = to_float(pack.v[i]);
  }
}

// src: [V], aligned to sizeof(T) * V bytes.
template <class T, int V>
__device__ __forceinline__ void load_floats(const T* src, float (&dst)[V]) {
  to_floats(*reinterpret_cast<const Pack<T, V>*>(src), dst);
}

// dst: [V], aligned as for load_floats.
template <class T, int V>
__device__ __forceinline__ void store_floats(T* dst, const float (&src)[V]) {
  Pack<T, V> pack;
#pragma unroll
  for (int i = 0; i < V; ++i) pack.v[i] = from_float<T>(src[i]);
  *reinterpret_cast<Pack<T, V>*>(dst) = pack;
}

// True when p is aligned for a Pack<T, V>.
template <class T, int V>
__host__ __device__ inline bool pack_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (sizeof(T) * V) == 0;
}

}  // namespace ignis::cuda
