#pragma once
// Launch helpers: stream conversion, the check after every kernel launch, and the device facts that
// launch plans read.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstddef>

#include "core/cuda_check.h"
#include "ignis/stream.h"

namespace ignis::cuda {

inline cudaStream_t to_cuda(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

// Reports a launch failure (bad configuration, too much shared memory) at the launch site.
#define IGNIS_CHECK_LAUNCH() IGNIS_CUDA_CHECK(cudaGetLastError())

inline unsigned ceil_div(long long a, long long b) { return static_cast<unsigned>((a + b - 1) / b); }

// An attribute of the current device, asked every time.
inline int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  IGNIS_CUDA_CHECK(cudaGetDevice(&device));
  IGNIS_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

// A fact of the current device that does not change while the process runs (never 0), computed by
// compute() the first time it is asked for on that device and kept in `cache`, a static of the
// caller's (one slot a device; devices past its size are asked every time). Two threads asking at
// once may both compute it; they store the same value.
template <class T, std::size_t kDevices, class Compute>
T once_per_device(std::array<std::atomic<T>, kDevices>& cache, Compute compute) {
  int device = 0;
  IGNIS_CUDA_CHECK(cudaGetDevice(&device));
  if (static_cast<std::size_t>(device) >= kDevices) return compute();
  T value = cache[device].load(std::memory_order_relaxed);
  if (value == T{}) {
    value = compute();
    cache[device].store(value, std::memory_order_relaxed);
  }
  return value;
}

inline constexpr std::size_t kCachedDevices = 64;

// Multiprocessors of the current device (grid sizing for strided loops).
inline int sm_count() {
  static std::array<std::atomic<int>, kCachedDevices> cache{};
  return once_per_device(cache, [] { return device_attribute(cudaDevAttrMultiProcessorCount); });
}

// Peak DRAM bandwidth of the current device over its SMs, GB/s (1e9 bytes) an SM: kernels whose
// blocks are bound by their own per-row chain rather than by DRAM pick their block shape by it
// (H100 SXM ~25, H200 ~37).
inline double memory_gbps_per_sm() {
  static std::array<std::atomic<double>, kCachedDevices> cache{};
  return once_per_device(cache, [] {
    // Two transfers a clock (double data rate), bus width / 8 bytes each.
    const double clock_hz = 1e3 * device_attribute(cudaDevAttrMemoryClockRate);
    const double bus_bytes = device_attribute(cudaDevAttrGlobalMemoryBusWidth) / 8.0;
    return 2.0 * clock_hz * bus_bytes / 1e9 / sm_count();
  });
}

// Cards whose DRAM feeds an SM faster than this many GB/s (memory_gbps_per_sm): the H200, not the
// H100. Kernels that measured a different best shape on the two pick theirs by it
// (norm_backward_plan.h, embedding.cu).
inline constexpr double kFastMemoryGbpsPerSm = 30.0;

inline bool fast_memory_card() { return memory_gbps_per_sm() > kFastMemoryGbpsPerSm; }

}  // namespace ignis::cuda
