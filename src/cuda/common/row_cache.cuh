#pragma once
// Rows held on chip: a row-wise kernel copies its row into shared memory with asynchronous 16-byte
// copies (cp.async, sm_80), computes the row's statistics from there and writes its output from
// there, so DRAM sees each element read once. Shared memory rather than registers: the copies in
// flight hold no registers, so an SM keeps up to ~200 KB of loads in flight whatever the dtype (a
// register cache held half as many bf16 bytes as f32 bytes, and bf16 stalled at ~50% of copy
// bandwidth). A row too long for one block is split over the blocks of a thread-block cluster
// (sm_90), which combine their partial statistics through distributed shared memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/row_residency.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include <cooperative_groups.h>
#endif

namespace ignis::cuda {

constexpr int kRowThreads = 512;             // the most threads a row block has
constexpr int kPortableCluster = 8;          // the largest cluster every sm_90 part can schedule
constexpr int kMaxCluster = 16;              // H100/H200 also take 16 (a non-portable size)
constexpr long long kSliceBytes = 64 * 1024;  // a block's preferred share of a row: 3 blocks an SM
constexpr long long kPacksPerThread = 8;     // the packs a thread handles before the block grows
constexpr float kLog2e = 1.4426950408889634f;

// One row spread over `cluster` blocks of `threads` threads; block r of the cluster holds packs
// [r * slice, min((r + 1) * slice, packs)) of each of its inputs' rows, slice = ceil(packs / cluster),
// in `smem` bytes of dynamic shared memory. cluster == 0 means the row does not fit on chip.
struct RowPlan {
  int cluster = 0;
  int threads = 0;
  int smem = 0;
};

// Picks how `rows` rows of `packs` 16-byte packs (of each of `tensors` inputs) are held: the
// smallest cluster whose slices fit kSliceBytes, or failing that the largest cluster if its slices
// fit the device's shared memory. Threads: one per kPacksPerThread packs, between 32 and 512.
inline RowPlan plan_rows(long long rows, long long packs, int tensors) {
  const int max_cluster = device_attribute(cudaDevAttrClusterLaunch) != 0 ? kMaxCluster : 1;
  const long long room = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin) - 1024;  // static smem
  const long long pack_bytes = 16LL * tensors;
  for (int c = 1; c <= max_cluster; c *= 2) {
    const long long slice = (packs + c - 1) / c;
    const long long bytes = slice * pack_bytes;
    if (bytes > kSliceBytes && c < max_cluster) continue;
    if (bytes > room || rows * c > 0x7fffffffLL) return {};
    const long long threads = ((slice + kPacksPerThread - 1) / kPacksPerThread + 31) / 32 * 32;
    return {c, static_cast<int>(std::clamp<long long>(threads, 32, kRowThreads)), static_cast<int>(bytes)};
  }
  return {};
}

// The launch of `rows` clusters of plan.cluster blocks (a plain grid when plan.cluster is 1);
// `attribute` (kept alive by the caller) holds the cluster shape.
inline cudaLaunchConfig_t rows_launch_config(const RowPlan& plan, long long rows, cudaStream_t stream,
                                             cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(rows * plan.cluster));
  config.blockDim = dim3(static_cast<unsigned>(plan.threads));
  config.dynamicSmemBytes = static_cast<std::size_t>(plan.smem);
  config.stream = stream;
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = static_cast<unsigned>(plan.cluster);
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = plan.cluster > 1 ? 1 : 0;
  return config;
}

// `plan` with a one-block row's shared memory padded so that an SM holds about kResidentRowBytes of
// rows (row_residency.h), for `kernel`'s static shared memory.
template <class... Params>
RowPlan resident_plan(RowPlan plan, void (*kernel)(Params...)) {
  if (plan.cluster != 1 || !takes_row_pad(plan.smem)) return plan;  // no device queries where nothing changes
  cudaFuncAttributes built{};
  IGNIS_CUDA_CHECK(cudaFuncGetAttributes(&built, kernel));
  const long long static_bytes = static_cast<long long>(built.sharedSizeBytes);
  const long long room = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin) - static_bytes;
  const long long smem =
      resident_row_smem(plan.smem, device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor),
                        device_attribute(cudaDevAttrReservedSharedMemoryPerBlock), static_bytes,
                        device_attribute(cudaDevAttrMaxBlocksPerMultiprocessor));
  plan.smem = static_cast<int>(std::min(room, smem));
  return plan;
}

// Launches `kernel` with one cluster of plan.cluster blocks per row (pass plan.cluster to the
// kernel too) and plan.smem bytes of dynamic shared memory. Returns false, launching nothing, when
// a cluster cannot run: the kernel was JIT-built from the compute_80 PTX (no cluster code in it)
// or the device cannot co-schedule the cluster.
template <class... Params, class... Args>
bool launch_rows(void (*kernel)(Params...), const RowPlan& plan, long long rows, Stream stream, Args... args) {
  IGNIS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, plan.smem));
  IGNIS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  cudaLaunchAttribute attribute;
  cudaLaunchConfig_t config = rows_launch_config(plan, rows, to_cuda(stream), &attribute);
  if (plan.cluster > 1) {
    cudaFuncAttributes built{};
    IGNIS_CUDA_CHECK(cudaFuncGetAttributes(&built, kernel));
    if (built.ptxVersion < 90) return false;
    if (plan.cluster > kPortableCluster &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    if (cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...) != cudaSuccess) {
      (void)cudaGetLastError();  // a refused launch configuration is not sticky: clear it
      return false;
    }
    return true;
  }
  IGNIS_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
  return true;
}

// This block's part of its row: packs [first, end) of row `row`.
struct RowSlice {
  long long row;
  long long first;
  long long end;
};

__device__ __forceinline__ RowSlice row_slice(long long packs, int cluster) {
  const long long slice = (packs + cluster - 1) / cluster;
  const long long first = static_cast<long long>(blockIdx.x % cluster) * slice;
  return {blockIdx.x / cluster, first, min(packs, first + slice)};
}

// The block's dynamic shared memory, `which`-th of the slices of `s`'s length laid end to end.
template <class P>
__device__ __forceinline__ P* slice_cache(const RowSlice& s, int which) {
  extern __shared__ __align__(16) unsigned char row_smem[];
  return reinterpret_cast<P*>(row_smem) + which * (s.end - s.first);
}

// Starts copying packs [s.first, s.end) of `row` into `cache`. Thread t copies the packs
// t, t + blockDim.x, ..., the same ones it later reads, so no barrier is needed after wait_copies.
// row: [packs], one row; cache: [s.end - s.first].
template <class P>
__device__ __forceinline__ void copy_slice(const P* row, const RowSlice& s, P* cache) {
  static_assert(sizeof(P) == 16, "cp.async.cg copies 16 bytes");
  for (long long k = threadIdx.x; k < s.end - s.first; k += blockDim.x) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(cache + k));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(row + s.first + k) : "memory");
  }
}

// Waits for this thread's copies.
__device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Stores V floats as one pack into global memory: a 16-byte pack by one st.global.v4 intrinsic
// (through a T pointer the compiler split bf16 stores into 2-byte stores, and in
// norm_backward.cu's looping kernel even through a Pack or uint4 pointer); `streaming`: an
// evict-first store (16-byte packs; smaller ones store plainly).
template <class T, int V>
__device__ __forceinline__ void store_pack(Pack<T, V>* dst, const float (&v)[V], bool streaming = false) {
  Pack<T, V> pack;
#pragma unroll
  for (int i = 0; i < V; ++i) pack.v[i] = from_float<T>(v[i]);
  if constexpr (sizeof(pack) == 16) {
    uint4 words;
    memcpy(&words, &pack, sizeof(pack));
    if (streaming) __stcs(reinterpret_cast<uint4*>(dst), words);
    else __stwb(reinterpret_cast<uint4*>(dst), words);
  } else {
    *dst = pack;
  }
}

// 2^x in one MUFU instruction (relative error ~2^-22); 2^-inf = 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// exp(x - max): the difference first, so elements near the max keep full precision.
__device__ __forceinline__ float exp_minus(float x, float max) { return fast_exp2((x - max) * kLog2e); }

struct FastMergeSoftmax {
  __device__ __forceinline__ SoftmaxState operator()(SoftmaxState a, SoftmaxState b) const {
    const float m = fmaxf(a.max, b.max);
    if (m == -INFINITY) return {m, 0.0f};  // both empty; avoids -inf - -inf = NaN
    return {m, a.sum * exp_minus(a.max, m) + b.sum * exp_minus(b.max, m)};
  }
};

__device__ __forceinline__ float shuffle_xor(float v, int offset) { return __shfl_xor_sync(kFullMask, v, offset); }
__device__ __forceinline__ SoftmaxState shuffle_xor(SoftmaxState v, int offset) {
  return {shuffle_xor(v.max, offset), shuffle_xor(v.sum, offset)};
}
__device__ __forceinline__ float shuffle_lane0(float v) { return __shfl_sync(kFullMask, v, 0); }
__device__ __forceinline__ SoftmaxState shuffle_lane0(SoftmaxState v) {
  return {shuffle_lane0(v.max), shuffle_lane0(v.sum)};
}

// Lane 0's reduction of the warp, in every lane (lanes' butterfly orders may differ in the last bit).
template <class T, class Op>
__device__ __forceinline__ T warp_all_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, shuffle_xor(v, offset));
  return shuffle_lane0(v);
}

// Combines each block's value over the blocks of its cluster, in rank order, so every block gets
// the same bits. `slot` is one T of shared memory, reusable from one call to the next (the norm
// backward reduces once a row; a kernel that reduces once takes cluster_reduce_once, with one
// barrier instead of two). Only launched with cluster > 1 on sm_90, where the whole cluster calls this.
template <class T, class Op>
__device__ T cluster_reduce(T v, Op op, T* slot) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  if (threadIdx.x == 0) *slot = v;
  cluster.sync();
  v = *cluster.map_shared_rank(slot, 0);
  for (unsigned r = 1; r < cluster.num_blocks(); ++r) v = op(v, *cluster.map_shared_rank(slot, r));
  cluster.sync();  // the other blocks may still be reading this block's slot
  return v;
#else
  __trap();
  return v;
#endif
}

// Cluster kernels that reduce with row_reduce call this first, in every thread, when cluster > 1:
// it opens the barrier phase that row_reduce waits on before it writes into the other blocks'
// shared memory, which only then surely exists (every block has arrived, so has started). Opened
// at the start, that phase has long completed by the reduction: no wait.
__device__ __forceinline__ void cluster_arrive_started() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}

// cluster_reduce for a kernel's one reduction, with one cluster barrier instead of two: each block
// writes its value into slot [its rank] of every block's `slots` (kMaxCluster T of shared memory),
// one barrier makes the writes visible, and each warp reduces its own block's slots in a fixed
// butterfly order (the same bits in every block). Nothing is read remotely, so no block waits for
// the others to finish reading before it may exit. Needs cluster_arrive_started at the kernel's start.
template <class T, class Op>
__device__ T cluster_reduce_once(T v, Op op, T identity, T* slots) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");  // every block has started
  const unsigned blocks = cluster.num_blocks();
  if (threadIdx.x < blocks) *cluster.map_shared_rank(slots + cluster.block_rank(), threadIdx.x) = v;
  cluster.sync();
  const unsigned lane = threadIdx.x % 32;
  return warp_all_reduce(lane < blocks ? slots[lane] : identity, op);
#else
  __trap();
  return v;
#endif
}

// The reduction of every thread's `v` over the row's block (or cluster), the same bits in every
// thread. `identity` is op's neutral value; `scratch` is 32 T and `slots` kMaxCluster T in shared
// memory, each used once per kernel; a cluster kernel began with cluster_arrive_started.
template <class T, class Op>
__device__ T row_reduce(T v, Op op, T identity, int cluster, T* scratch, T* slots) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_all_reduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = warp_all_reduce(lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : identity, op);
  if (cluster > 1) v = cluster_reduce_once(v, op, identity, slots);
  return v;
}

// The largest element of a pack. 16-bit packs compare pairs in their own type (max is exact in
// any format; NaN loses to a number, as in fmaxf) and convert once: ~0.6 instructions an
// element instead of a conversion and an fmaxf each.
template <class T, int V>
__device__ __forceinline__ float pack_max(const Pack<T, V>& p) {
  if constexpr (V % 2 == 0 && (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>)) {
    using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    const T2* pairs = reinterpret_cast<const T2*>(p.v);
    T2 m2 = pairs[0];
#pragma unroll
    for (int i = 1; i < V / 2; ++i) m2 = __hmax2(m2, pairs[i]);
    return fmaxf(to_float(m2.x), to_float(m2.y));
  } else {
    float m = to_float(p.v[0]);
#pragma unroll
    for (int i = 1; i < V; ++i) m = fmaxf(m, to_float(p.v[i]));
    return m;
  }
}

// The whole row's (max, sum of exp(x - max)) in every thread, from this thread's cached packs
// (see copy_slice) plus one `extra` value (-inf for none).
// cache: [s.end - s.first] packs.
template <class T, int V>
__device__ SoftmaxState row_softmax_state(const Pack<T, V>* cache, const RowSlice& s, float extra, int cluster,
                                          SoftmaxState* scratch, SoftmaxState* slots) {
  const long long count = s.end - s.first;
  float m = extra;
  for (long long k = threadIdx.x; k < count; k += blockDim.x) m = fmaxf(m, pack_max(cache[k]));
  float sum = 0.0f;
  if (m != -INFINITY) {  // else every value is -inf: the empty state, not exp(-inf - -inf) = NaN
    sum = exp_minus(extra, m);
    for (long long k = threadIdx.x; k < count; k += blockDim.x) {
      const Pack<T, V> p = cache[k];
#pragma unroll
      for (int i = 0; i < V; ++i) sum += exp_minus(to_float(p.v[i]), m);
    }
  }
  return row_reduce(SoftmaxState{m, sum}, FastMergeSoftmax{}, SoftmaxState{-INFINITY, 0.0f}, cluster, scratch, slots);
}

}  // namespace ignis::cuda
