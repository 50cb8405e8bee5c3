#pragma once
// CHECK for the hand-built diagnostics in bench/ (stream_probe.cu, launch_probe.cu, host_cost.cu): a CUDA call that fails
// prints the call, its error and the line, and exits.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t status_ = (x);                                                                \
    if (status_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s: %s (line %d)\n", #x, cudaGetErrorString(status_), __LINE__); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
