#pragma once
// An owning, aligned allocation on the host or on a CUDA device. Tensors share it.
#include <cstddef>
#include <memory>

#include "ignis/device.h"

namespace ignis {

class Storage {
 public:
  // Allocates `bytes` on `device` (host memory is 64-byte aligned). Contents are unspecified.
  static std::shared_ptr<Storage> allocate(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Storage(void* data, std::size_t bytes, Device device) : data_(data), bytes_(bytes), device_(device) {}
  void* data_;
  std::size_t bytes_;
  Device device_;
};

// Copies `bytes` between any two devices (host<->device, device<->device, host<->host). Synchronous.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);

}  // namespace ignis
