// Tensor views, owning tensors, strides, contiguity, devices and argument-check messages.
#include <gtest/gtest.h>

#include "ignis/device.h"
#include "ignis/tensor.h"
#include "model/error_text.h"

namespace ignis {
namespace {

TEST(Tensor, EmptyIsContiguousRowMajor) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::bf16);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
}

TEST(Tensor, StridedViewsAreNotContiguous) {
  float buffer[16] = {};
  Tensor every_other = Tensor::view(buffer, DType::f32, Device::cpu(), {4, 2}, {4, 2});
  EXPECT_FALSE(every_other.is_contiguous());
  EXPECT_FALSE(every_other.rows_contiguous());
  Tensor padded_rows = Tensor::view(buffer, DType::f32, Device::cpu(), {4, 3}, {4, 1});
  EXPECT_FALSE(padded_rows.is_contiguous());
  EXPECT_TRUE(padded_rows.rows_contiguous());
  // Extents of 1 may carry any stride and still be contiguous.
  Tensor column = Tensor::view(buffer, DType::f32, Device::cpu(), {4, 1}, {1, 99});
  EXPECT_TRUE(column.is_contiguous());
}

TEST(Tensor, ReshapeAndCopyShareOrCopyData) {
  Tensor t = Tensor::empty({2, 6}, DType::f32);
  for (int i = 0; i < 12; ++i) t.data_as<float>()[i] = static_cast<float>(i);
  Tensor r = t.reshape({3, 4});
  EXPECT_EQ(r.data(), t.data());
  EXPECT_EQ(r.strides(), (Shape{4, 1}));
  Tensor c = t.to(Device::cpu());
  EXPECT_NE(c.data(), t.data());
  EXPECT_EQ(c.data_as<float>()[11], 11.0f);
  EXPECT_ERROR_CONTAINS(t.reshape({5}), "Tensor::reshape: element count");
}

TEST(Tensor, ErrorsNameArgumentExpectedAndActual) {
  Tensor t = Tensor::empty({2, 3}, DType::f32);
  try {
    check_shape(t, {2, 4}, "my_op", "weight");
    FAIL() << "check_shape accepted a wrong shape";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "my_op: weight.shape: expected [2, 4], got [2, 3]");
  }
  try {
    check_dtype(t, DType::bf16, "my_op", "x");
    FAIL() << "check_dtype accepted a wrong dtype";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "my_op: x.dtype: expected bf16, got f32");
  }
  EXPECT_ERROR_CONTAINS(check_device(t, Device::cuda(0), "my_op", "x"), "my_op: x.device");
  EXPECT_ERROR_CONTAINS(Tensor::empty({2, -1}, DType::f32), "Tensor::empty: shape");
  EXPECT_ERROR_CONTAINS(t.size(2), "Tensor::size: dim");
}

// Counts how often it is written to a stream: a part of a message that must stay unformatted while
// its check passes.
struct CountedPart {
  int* writes;
};
std::ostream& operator<<(std::ostream& out, const CountedPart& part) {
  ++*part.writes;
  return out << "part";
}

TEST(Tensor, ChecksFormatTheirMessageOnlyWhenTheyFail) {
  int writes = 0;
  const CountedPart part{&writes};
  check_arg(true, "my_op", detail::lazy_concat("x", part), part, detail::lazy_concat(part, 7));
  EXPECT_EQ(writes, 0) << "a passing check formatted its message";
  try {
    check_arg(false, "my_op", detail::lazy_concat("x.", part), part, detail::lazy_concat(part, " of ", 7));
    FAIL() << "check_arg(false, ...) did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "my_op: x.part: expected part, got part of 7");
  }
  EXPECT_EQ(writes, 3);
  Tensor t = Tensor::empty({2, 3}, DType::f32);
  EXPECT_EQ(detail::concat(ShapeText{t.shape()}), shape_str(t.shape()));
  EXPECT_EQ(shape_str(t.shape()), "[2, 3]");
  EXPECT_ERROR_CONTAINS(
      check_contiguous(Tensor::view(t.data(), DType::f32, Device::cpu(), {3, 2}, {1, 3}), "my_op", "x"),
      "my_op: x.strides: expected contiguous [2, 1], got [1, 3]");
}

TEST(Device, ParsesAndPrints) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
  EXPECT_ERROR_CONTAINS(Device::parse("gpu"), "Device::parse: device");
  EXPECT_ERROR_CONTAINS(Device::parse("cuda:"), "Device::parse: device");
  EXPECT_ERROR_CONTAINS(Device::parse("cuda:-1"), "Device::parse: device");
  EXPECT_ERROR_CONTAINS(Device::parse("cuda:1x"), "Device::parse: device");
}

TEST(Device, CountIsConsistentWithAvailability) {
  EXPECT_EQ(cuda_available(), cuda_device_count() > 0);
  EXPECT_FALSE(cuda_device_summary().empty());
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::u8), 1u);
  EXPECT_EQ(dtype_name(DType::i64), "i64");
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_FALSE(is_floating(DType::i32));
}

}  // namespace
}  // namespace ignis
