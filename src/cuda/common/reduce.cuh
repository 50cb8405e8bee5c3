#pragma once
// Warp- and block-wide reductions by shuffles, including the (max, sum) pair of an online softmax.
#include <cuda_runtime.h>

#include <cmath>

namespace ignis::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

struct Sum {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces across the whole block and returns the result to every thread.
// `scratch` holds 32 T in shared memory; blockDim.x must be a multiple of 32.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < warps; ++w) v = op(v, scratch[w]);
  return v;
}

// Running max m and sum s of exp(x - m) over the elements seen so far. Empty: m = -inf, s = 0.
struct SoftmaxState {
  float max;
  float sum;
};

__device__ __forceinline__ SoftmaxState merge(SoftmaxState a, SoftmaxState b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.0f};  // both empty; avoids exp(-inf - -inf) = NaN
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

struct MergeSoftmax {
  __device__ __forceinline__ SoftmaxState operator()(SoftmaxState a, SoftmaxState b) const { return merge(a, b); }
};

template <>
__device__ __forceinline__ SoftmaxState warp_reduce<SoftmaxState, MergeSoftmax>(SoftmaxState v, MergeSoftmax op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    SoftmaxState other{__shfl_xor_sync(kFullMask, v.max, offset), __shfl_xor_sync(kFullMask, v.sum, offset)};
    v = op(v, other);
  }
  return v;
}

}  // namespace ignis::cuda
