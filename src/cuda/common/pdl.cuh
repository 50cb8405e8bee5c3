#pragma once
// Programmatic dependent launch (Hopper): a kernel launched with Stream::overlap_previous may
// start while the previous kernel on the stream still runs. Its blocks first call pdl_trigger()
// (let the kernel after them start early in turn), may then read inputs nobody on the stream is
// writing (weights), and must call pdl_wait() before reading or writing
// anything else: it returns once every earlier kernel has finished and its writes are visible.
// Without the launch attribute both calls cost nothing and the launch is ordinary. On GPUs before
// sm_90 they compile to nothing.
#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "ignis/stream.h"

namespace ignis::cuda {

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), allowed to start while the previous kernel on the
// stream still runs when `overlap` is set (the programmatic-serialization attribute); launch errors
// are left for IGNIS_CHECK_LAUNCH.
template <class... Params, class... Args>
void launch_overlapping(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                        bool overlap, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = overlap ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// launch_overlapping when the stream asks for overlap, and only on a created stream: the legacy
// default stream synchronizes with every other stream, so the work before a launch there may be
// another stream's. (An op's own second kernel, launched right after its first and reading only
// what the first wrote, may overlap on any stream: launch_overlapping with overlap set.)
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, Stream stream,
                   Args&&... args) {
  launch_overlapping(kernel, grid, block, smem, to_cuda(stream), stream.overlap_previous && stream.handle != nullptr,
                     std::forward<Args>(args)...);
}

}  // namespace ignis::cuda
