#pragma once
// Rows held on chip: a row-wise kernel keeps its row in registers between computing the row's
// statistics and writing its output, so DRAM sees each element read once. A row too long for one
// block is split over the blocks of a thread-block cluster (sm_90), which combine their partial
// statistics through distributed shared memory.
#include <cuda_runtime.h>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include <cooperative_groups.h>
#endif

namespace ignis::cuda {

constexpr int kRowThreads = 1024;  // the kernels' __launch_bounds__: at most 64 registers a thread
constexpr int kMaxCluster = 8;     // the largest cluster every sm_90 part can schedule

// One row spread over `cluster` blocks of `threads` threads, each thread holding `packs_per_thread`
// packs; block r of the cluster holds packs [r * slice, (r + 1) * slice) of the row, where
// slice = threads * packs_per_thread. cluster == 0 means the row does not fit on chip.
struct RowPlan {
  int cluster = 0;
  int packs_per_thread = 0;
  int threads = 0;
};

inline bool device_has_clusters() {
  int device = 0, clusters = 0;
  IGNIS_CUDA_CHECK(cudaGetDevice(&device));
  IGNIS_CUDA_CHECK(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device));
  return clusters != 0;
}

// Picks how `rows` rows of `packs` packs are held, with at most max_ppt packs a thread.
// Blocks of at most 512 threads are preferred (even at the price of a cluster), so two or more
// blocks share an SM and one block's reduction barrier is covered by the other's memory traffic.
// Packs a thread: max_ppt keeps the most loads in flight; rows too short for two warps at that
// depth use 1 (max_ppt 2 or 4) or 4 (max_ppt 8), then 1.
inline RowPlan plan_rows(long long rows, long long packs, int max_ppt, bool clusters) {
  const int max_cluster = clusters ? kMaxCluster : 1;
  const int mid_ppt = max_ppt > 4 ? 4 : 1;
  for (int cap : {512, kRowThreads}) {
    for (int c = 1; c <= max_cluster; c *= 2) {
      const long long per_block = (packs + c - 1) / c;
      if (per_block > static_cast<long long>(cap) * max_ppt) continue;
      if (rows * c > 0x7fffffffLL) return {};
      const int ppt = per_block >= 64LL * max_ppt ? max_ppt : per_block >= 32LL * mid_ppt ? mid_ppt : 1;
      const long long threads = ((per_block + ppt - 1) / ppt + 31) / 32 * 32;
      return {c, ppt, threads > 32 ? static_cast<int>(threads) : 32};
    }
  }
  return {};
}

// Launches `kernel` with one cluster of plan.cluster blocks per row (pass plan.cluster to the
// kernel too). Returns false, launching nothing, when a cluster cannot run: the kernel was JIT-built
// from the compute_80 PTX (no cluster code in it) or the device cannot co-schedule the cluster.
template <class... Params, class... Args>
bool launch_rows(void (*kernel)(Params...), const RowPlan& plan, long long rows, Stream stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(rows * plan.cluster));
  config.blockDim = dim3(static_cast<unsigned>(plan.threads));
  config.stream = to_cuda(stream);
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = static_cast<unsigned>(plan.cluster);
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = plan.cluster > 1 ? 1 : 0;
  if (plan.cluster > 1) {
    cudaFuncAttributes built{};
    IGNIS_CUDA_CHECK(cudaFuncGetAttributes(&built, kernel));
    if (built.ptxVersion < 90) return false;
    if (cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...) != cudaSuccess) {
      (void)cudaGetLastError();  // a refused launch configuration is not sticky: clear it
      return false;
    }
    return true;
  }
  IGNIS_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
  return true;
}

// The index in the row of a thread's k-th held pack.
__device__ __forceinline__ long long held_index(long long first, int k) {
  return first + threadIdx.x + static_cast<long long>(k) * blockDim.x;
}

// How many of the packs [first, packs) of a row this thread holds, at most P, taken at stride
// blockDim.x from first + threadIdx.x.
template <int P>
__device__ __forceinline__ int held_count(long long first, long long packs) {
  const long long mine = packs - first - threadIdx.x;
  const long long reach = mine <= 0 ? 0 : (mine + blockDim.x - 1) / blockDim.x;
  return reach < P ? static_cast<int>(reach) : P;
}

// Loads this thread's packs (see held_count) and returns their count. The slots past the row are
// filled with `fill`, so the arithmetic over them needs no bounds checks.
template <class T, int V, int P>
__device__ __forceinline__ int load_held(const Pack<T, V>* in, long long first, long long packs,
                                         Pack<T, V> (&held)[P], float fill) {
  const int count = held_count<P>(first, packs);
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k < count) {
      held[k] = in[held_index(first, k)];
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) held[k].v[i] = from_float<T>(fill);
    }
  }
  return count;
}

// Combines each block's (block-reduced) value over the blocks of its cluster, in rank order, so
// every block gets the same bits. `slot` is one T of shared memory. Only launched with
// cluster > 1 on sm_90, where the whole cluster calls this.
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

// The whole row's (max, sum of exp(x - max)) in every thread, from each thread's held packs plus
// one `extra` value (-inf for none). `scratch` is 32 states and `slot` one, in shared memory.
template <class T, int V, int P>
__device__ SoftmaxState row_softmax_state(const Pack<T, V> (&held)[P], float extra, int cluster,
                                          SoftmaxState* scratch, SoftmaxState* slot) {
  float m = extra;
#pragma unroll
  for (int k = 0; k < P; ++k)
#pragma unroll
    for (int i = 0; i < V; ++i) m = fmaxf(m, to_float(held[k].v[i]));
  float sum = 0.0f;
  if (m != -INFINITY) {  // else every value is -inf: the empty state, not exp(-inf - -inf) = NaN
    sum = expf(extra - m);
#pragma unroll
    for (int k = 0; k < P; ++k)
#pragma unroll
      for (int i = 0; i < V; ++i) sum += expf(to_float(held[k].v[i]) - m);
  }
  SoftmaxState state = block_reduce(SoftmaxState{m, sum}, MergeSoftmax{}, scratch);
  if (cluster > 1) state = cluster_reduce(state, MergeSoftmax{}, slot);
  return state;
}

}  // namespace ignis::cuda
