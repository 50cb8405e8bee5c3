#pragma once
// Launch helpers: stream conversion and the check after every kernel launch.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "ignis/stream.h"

namespace ignis::cuda {

inline cudaStream_t to_cuda(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

// Reports a launch failure (bad configuration, too much shared memory) at the launch site.
#define IGNIS_CHECK_LAUNCH() IGNIS_CUDA_CHECK(cudaGetLastError())

inline unsigned ceil_div(long long a, long long b) { return static_cast<unsigned>((a + b - 1) / b); }

// Multiprocessors of the current device, asked once per device (grid sizing for strided loops).
inline int sm_count() {
  constexpr int kMaxDevices = 64;
  static int cached[kMaxDevices] = {};
  int device = 0;
  IGNIS_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= kMaxDevices) device = kMaxDevices - 1;
  if (cached[device] == 0)
    IGNIS_CUDA_CHECK(cudaDeviceGetAttribute(&cached[device], cudaDevAttrMultiProcessorCount, device));
  return cached[device];
}

// Peak DRAM bandwidth of the current device over its SMs, GB/s (1e9 bytes) an SM, asked once per
// device: kernels whose blocks are bound by their own per-row chain rather than by DRAM pick their
// block shape by it (H100 SXM ~25, H200 ~37).
inline double memory_gbps_per_sm() {
  constexpr int kMaxDevices = 64;
  static double cached[kMaxDevices] = {};
  int device = 0;
  IGNIS_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= kMaxDevices) device = kMaxDevices - 1;
  if (cached[device] == 0.0) {
    int clock_khz = 0, bus_bits = 0;
    IGNIS_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
    IGNIS_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
    // Two transfers a clock (double data rate), bus_bits / 8 bytes each.
    cached[device] = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9 / sm_count();
  }
  return cached[device];
}

}  // namespace ignis::cuda
