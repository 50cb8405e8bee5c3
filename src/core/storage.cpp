#include "ignis/storage.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "ignis/error.h"

#if IGNIS_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace ignis {

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes, Device device) {
  void* data = nullptr;
  if (device.is_cpu()) {
    constexpr std::size_t alignment = 64;
    const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    if (rounded > 0) {
      data = std::aligned_alloc(alignment, rounded);
      if (data == nullptr)
        throw Error(detail::concat("Storage::allocate: host allocation of ", bytes, " bytes failed"));
    }
  } else {
#if IGNIS_WITH_CUDA
    if (bytes > 0) {
      IGNIS_CUDA_CHECK(cudaSetDevice(device.index));
      IGNIS_CUDA_CHECK(cudaMalloc(&data, bytes));
    }
#else
    fail_expected("Storage::allocate", "device", "cpu (ignis was built without CUDA)", device);
#endif
  }
  return std::shared_ptr<Storage>(new Storage(data, bytes, device));
}

Storage::~Storage() {
  if (data_ == nullptr) return;
  if (device_.is_cpu()) {
    std::free(data_);
  } else {
#if IGNIS_WITH_CUDA
    cudaFree(data_);  // a destructor must not throw; a failure here leaks at worst
#endif
  }
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if IGNIS_WITH_CUDA
  const cudaMemcpyKind kind = dst_device.is_cpu()   ? cudaMemcpyDeviceToHost
                              : src_device.is_cpu() ? cudaMemcpyHostToDevice
                                                    : cudaMemcpyDeviceToDevice;
  IGNIS_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
#else
  fail_expected("copy_bytes", "devices", "cpu (ignis was built without CUDA)",
                detail::concat(src_device, " -> ", dst_device));
#endif
}

}  // namespace ignis
