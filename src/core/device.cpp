#include "ignis/device.h"

#include <charconv>

#include "ignis/error.h"

#if IGNIS_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ignis {

std::string Device::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    const std::string_view digits = text.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0) return cuda(index);
  }
  fail_expected("Device::parse", "device", "\"cpu\", \"cuda\" or \"cuda:N\"", "\"" + std::string(text) + "\"");
}

int cuda_device_count() {
#if IGNIS_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver/no device" status
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

bool cuda_available() { return cuda_device_count() > 0; }

std::string cuda_device_summary() {
#if IGNIS_WITH_CUDA
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable GPU: ") + cudaGetErrorString(status);
  }
  if (count == 0) return "no usable GPU: no CUDA device found";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "no usable GPU: cudaGetDeviceProperties failed";
  std::string summary = detail::concat(prop.name, ", sm_", prop.major, prop.minor, ", ", prop.multiProcessorCount,
                                       " SMs, ", prop.totalGlobalMem >> 20, " MiB");
  // Peak DRAM bandwidth (double data rate over the bus) and its share an SM, by which some kernels
  // choose their block shape (cuda/common/launch.cuh, memory_gbps_per_sm).
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) == cudaSuccess && clock_khz > 0) {
    const long long gbps = 2LL * clock_khz * (bus_bits / 8) / 1000000;
    summary += detail::concat(", DRAM ", gbps, " GB/s (", gbps * 10 / prop.multiProcessorCount / 10.0, " an SM)");
  }
  cudaGetLastError();
  return summary;
#else
  return "no usable GPU: ignis was built without CUDA";
#endif
}

}  // namespace ignis
