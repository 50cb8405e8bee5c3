#pragma once
// Caps the blocks of a kernel an SM holds on the current device by the dynamic shared memory each
// block asks for (sm_share.h), for kernels that stream better with fewer requests in flight an SM
// than their registers and threads would allow.
#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/sm_share.h"

namespace ignis::cuda {

// Sets `kernel` up to take the dynamic shared memory that leaves room for at most `blocks` of it an
// SM, and returns that size, to pass at launch (the kernel need not touch it). Returns 0, changing
// nothing, where the device cannot give a block that much.
template <class... Params>
int cap_blocks_an_sm(void (*kernel)(Params...), int blocks) {
  cudaFuncAttributes built{};
  IGNIS_CUDA_CHECK(cudaFuncGetAttributes(&built, kernel));
  const long long static_bytes = static_cast<long long>(built.sharedSizeBytes);
  const long long smem = smem_for_blocks_an_sm(blocks, device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor),
                                               device_attribute(cudaDevAttrReservedSharedMemoryPerBlock), static_bytes);
  if (smem <= 0 || smem + static_bytes > device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin)) return 0;
  IGNIS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  // The shared-memory share of the SM's L1, at its most: a smaller carveout would hold fewer blocks still.
  IGNIS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  return static_cast<int>(smem);
}

}  // namespace ignis::cuda
