#pragma once
// A strided view of memory: data pointer, dtype, device, shape and strides (in elements).
// A Tensor either borrows memory (Tensor::view) or shares ownership of a Storage
// (Tensor::empty); either way copying a Tensor copies the view, never the data.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ignis/device.h"
#include "ignis/dtype.h"
#include "ignis/error.h"
#include "ignis/storage.h"

namespace ignis {

using Shape = std::vector<std::int64_t>;

std::string shape_str(const Shape& shape);
// A shape streamed as shape_str writes it, when the stream is written (for check_arg's parts).
struct ShapeText {
  const Shape& shape;
};
std::ostream& operator<<(std::ostream& out, ShapeText text);
// Row-major strides for `shape`, in elements.
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Borrows `data`; the caller keeps it alive. Strides default to row-major.
  static Tensor view(void* data, DType dtype, Device device, Shape shape, Shape strides = {});
  // Allocates a new contiguous tensor; contents are unspecified.
  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());

  void* data() const { return data_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int dim() const { return static_cast<int>(shape_.size()); }
  std::int64_t size(int d) const;    // negative d counts from the end
  std::int64_t stride(int d) const;  // negative d counts from the end
  std::int64_t numel() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }
  bool is_contiguous() const;
  // True when the last dimension has stride 1 (rows may be padded).
  bool rows_contiguous() const;

  // A contiguous copy on `device` (same dtype).
  Tensor to(Device device) const;
  // Same data viewed with another shape; requires contiguity and an equal element count.
  Tensor reshape(Shape shape) const;

 private:
  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Device device_;
  Shape shape_;
  Shape strides_;
};

// Argument checks shared by every op launcher. `where` is the op name, `name` the argument.
void check_dtype(const Tensor& t, DType expected, const char* where, const char* name);
void check_device(const Tensor& t, Device expected, const char* where, const char* name);
void check_shape(const Tensor& t, const Shape& expected, const char* where, const char* name);
void check_dim(const Tensor& t, int expected, const char* where, const char* name);
void check_contiguous(const Tensor& t, const char* where, const char* name);

}  // namespace ignis
