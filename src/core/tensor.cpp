#include "ignis/tensor.h"

#include <sstream>

namespace ignis {

std::ostream& operator<<(std::ostream& out, ShapeText text) {
  out << '[';
  for (std::size_t i = 0; i < text.shape.size(); ++i) out << (i ? ", " : "") << text.shape[i];
  return out << ']';
}

std::string shape_str(const Shape& shape) { return detail::concat(ShapeText{shape}); }

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

static void check_shape_valid(const Shape& shape, const char* where) {
  for (std::int64_t extent : shape)
    check_arg(extent >= 0, where, "shape", "non-negative extents", ShapeText{shape});
}

Tensor Tensor::view(void* data, DType dtype, Device device, Shape shape, Shape strides) {
  check_shape_valid(shape, "Tensor::view");
  if (strides.empty()) strides = contiguous_strides(shape);
  check_arg(strides.size() == shape.size(), "Tensor::view", "strides rank", shape.size(), strides.size());
  Tensor t;
  t.data_ = data;
  t.dtype_ = dtype;
  t.device_ = device;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  return t;
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  check_shape_valid(shape, "Tensor::empty");
  Tensor t;
  t.dtype_ = dtype;
  t.device_ = device;
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  t.storage_ = Storage::allocate(t.nbytes(), device);
  t.data_ = t.storage_->data();
  return t;
}

static int normalize_dim(int d, int rank, const char* where) {
  const int normalized = d < 0 ? d + rank : d;
  check_arg(normalized >= 0 && normalized < rank, where, "dim", detail::lazy_concat("in [", -rank, ", ", rank, ")"), d);
  return normalized;
}

std::int64_t Tensor::size(int d) const { return shape_[normalize_dim(d, dim(), "Tensor::size")]; }
std::int64_t Tensor::stride(int d) const { return strides_[normalize_dim(d, dim(), "Tensor::stride")]; }

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t extent : shape_) n *= extent;
  return n;
}

bool Tensor::is_contiguous() const {
  std::int64_t step = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != step) return false;
    step *= shape_[i];
  }
  return true;
}

bool Tensor::rows_contiguous() const { return shape_.empty() || shape_.back() <= 1 || strides_.back() == 1; }

Tensor Tensor::to(Device device) const {
  check_contiguous(*this, "Tensor::to", "self");
  Tensor out = empty(shape_, dtype_, device);
  copy_bytes(out.data_, device, data_, device_, nbytes());
  return out;
}

Tensor Tensor::reshape(Shape shape) const {
  check_contiguous(*this, "Tensor::reshape", "self");
  Tensor out = *this;
  out.shape_ = std::move(shape);
  check_arg(out.numel() == numel(), "Tensor::reshape", "element count", numel(), out.numel());
  out.strides_ = contiguous_strides(out.shape_);
  return out;
}

void check_dtype(const Tensor& t, DType expected, const char* where, const char* name) {
  check_arg(t.dtype() == expected, where, detail::lazy_concat(name, ".dtype"), expected, t.dtype());
}

void check_device(const Tensor& t, Device expected, const char* where, const char* name) {
  check_arg(t.device() == expected, where, detail::lazy_concat(name, ".device"), expected, t.device());
}

void check_shape(const Tensor& t, const Shape& expected, const char* where, const char* name) {
  check_arg(t.shape() == expected, where, detail::lazy_concat(name, ".shape"), ShapeText{expected},
            ShapeText{t.shape()});
}

void check_dim(const Tensor& t, int expected, const char* where, const char* name) {
  check_arg(t.dim() == expected, where, detail::lazy_concat(name, ".dim"), expected, t.dim());
}

void check_contiguous(const Tensor& t, const char* where, const char* name) {
  if (!t.is_contiguous())
    fail_expected(where, detail::lazy_concat(name, ".strides"),
                  detail::lazy_concat("contiguous ", ShapeText{contiguous_strides(t.shape())}), ShapeText{t.strides()});
}

}  // namespace ignis
