#pragma once
// Turns a failed CUDA runtime call into an ignis::Error naming the call and the CUDA error.
#include <cuda_runtime_api.h>

#include "ignis/error.h"

#define IGNIS_CUDA_CHECK(call)                                                                   \
  do {                                                                                           \
    const cudaError_t ignis_status_ = (call);                                                    \
    if (ignis_status_ != cudaSuccess)                                                            \
      throw ::ignis::Error(::ignis::detail::concat(#call, ": ", cudaGetErrorName(ignis_status_), \
                                                   " (", cudaGetErrorString(ignis_status_), ")")); \
  } while (0)
