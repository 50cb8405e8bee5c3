// Every activation implementation (CPU f32; CUDA f32/f16/bf16) against the fp64 reference:
// odd sizes (vector packs plus scalar tails), operands not 16-byte aligned, saturating inputs,
// poisoned outputs, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/activation.h"

namespace ignis {
namespace {

using test::Impl;

class ActivationOp : public testing::TestWithParam<Impl> {};

// An elementwise op under test: its input and output counts, the op, and its reference.
struct Case {
  const char* name;
  int inputs;
  int outputs;
  std::function<void(const std::vector<Tensor>& in, const std::vector<Tensor>& out)> run;
  std::function<std::vector<std::vector<double>>(const std::vector<std::vector<double>>& in)> ref;
};

std::vector<Case> cases() {
  using Vals = std::vector<std::vector<double>>;
  return {
      {"gelu_tanh_forward", 1, 1, [](const auto& in, const auto& out) { gelu_tanh_forward(in[0], out[0]); },
       [](const Vals& in) { return Vals{ref::gelu_tanh_forward(in[0])}; }},
      {"gelu_tanh_backward", 2, 1, [](const auto& in, const auto& out) { gelu_tanh_backward(in[0], in[1], out[0]); },
       [](const Vals& in) { return Vals{ref::gelu_tanh_backward(in[0], in[1])}; }},
      {"silu_forward", 1, 1, [](const auto& in, const auto& out) { silu_forward(in[0], out[0]); },
       [](const Vals& in) { return Vals{ref::silu_forward(in[0])}; }},
      {"silu_backward", 2, 1, [](const auto& in, const auto& out) { silu_backward(in[0], in[1], out[0]); },
       [](const Vals& in) { return Vals{ref::silu_backward(in[0], in[1])}; }},
      {"swiglu_forward", 2, 1, [](const auto& in, const auto& out) { swiglu_forward(in[0], in[1], out[0]); },
       [](const Vals& in) { return Vals{ref::swiglu_forward(in[0], in[1])}; }},
      {"swiglu_backward", 3, 2,
       [](const auto& in, const auto& out) { swiglu_backward(in[0], in[1], in[2], out[0], out[1]); },
       [](const Vals& in) {
         auto g = ref::swiglu_backward(in[0], in[1], in[2]);
         return Vals{g.dgate, g.dup};
       }},
  };
}

// A tensor of `shape` holding `values` (or poison), whose data starts `offset` elements into a
// larger allocation, so an offset of 1 breaks 16-byte alignment. `keep` owns the allocation.
Tensor offset_tensor(const std::vector<double>& values, const Shape& shape, const Impl& impl, int offset, bool poison,
                     Tensor& keep) {
  std::vector<double> padded(static_cast<std::size_t>(offset) + values.size(), 0.0);
  std::copy(values.begin(), values.end(), padded.begin() + offset);
  const std::int64_t total = static_cast<std::int64_t>(padded.size());
  keep = poison ? test::make_poisoned({total}, impl.dtype, impl.device)
                : test::make_tensor(padded, {total}, impl.dtype, impl.device);
  return Tensor::view(static_cast<char*>(keep.data()) + offset * dtype_size(impl.dtype), impl.dtype, impl.device,
                      shape);
}

// The first input spans negative to positive saturation plus a few exact special values.
void check_case(const Case& c, const Impl& impl, const Shape& shape, int offset, std::uint64_t salt) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  SCOPED_TRACE(testing::Message() << c.name << " " << impl << " shape " << shape_str(shape) << " offset " << offset);
  auto rng = test::case_rng(salt);
  std::vector<std::vector<double>> vals;
  std::vector<Tensor> in, out, keep(c.inputs + c.outputs);
  for (int i = 0; i < c.inputs; ++i) {
    auto v = test::random_normal(rng, n, i == 0 ? 4.0 : 1.0);
    if (i == 0) {
      const double special[] = {0.0, 30.0, -30.0, 100.0, -100.0, 1e4, -1e4};
      for (std::size_t k = 0; k < std::size(special) && static_cast<std::int64_t>(k) * 7 < n; ++k)
        v[k * 7] = special[k];
    }
    vals.push_back(test::quantize(v, impl.dtype));
    in.push_back(offset_tensor(vals.back(), shape, impl, offset, false, keep[i]));
  }
  for (int o = 0; o < c.outputs; ++o)
    out.push_back(offset_tensor(std::vector<double>(n), shape, impl, offset, true, keep[c.inputs + o]));
  c.run(in, out);
  const auto refs = c.ref(vals);
  for (int o = 0; o < c.outputs; ++o) {
    const Tensor whole = keep[c.inputs + o];
    auto got = test::read_tensor(whole);
    got.erase(got.begin(), got.begin() + offset);
    EXPECT_TRUE(test::close_to_reference(got, refs[o], impl.dtype, test::quantize(refs[o], impl.dtype)))
        << "output " << o;
  }
}

TEST_P(ActivationOp, OddSizes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, activation_supported(impl.device, impl.dtype));
  std::uint64_t salt = 0;
  for (const Case& c : cases()) {
    for (std::int64_t n : test::kOddSizes) check_case(c, impl, {n}, 0, ++salt);
    for (std::int64_t n : {8, 4096, 5000, 100003}) check_case(c, impl, {n}, 0, ++salt);
    check_case(c, impl, {17, 113}, 0, ++salt);
    check_case(c, impl, {3, 1024}, 0, ++salt);
  }
}

TEST_P(ActivationOp, UnalignedOperands) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, activation_supported(impl.device, impl.dtype));
  std::uint64_t salt = 1000;
  for (const Case& c : cases())
    for (std::int64_t n : {1, 17, 4096}) check_case(c, impl, {n}, 1, ++salt);
}

TEST_P(ActivationOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, activation_supported(impl.device, impl.dtype));
  Tensor x = test::make_poisoned({4, 8}, impl.dtype, impl.device);
  Tensor y = test::make_poisoned({4, 8}, impl.dtype, impl.device);
  Tensor wrong_shape = test::make_poisoned({4, 9}, impl.dtype, impl.device);
  Tensor flat = test::make_poisoned({32}, impl.dtype, impl.device);
  const DType other = impl.dtype == DType::f32 ? DType::f64 : DType::f32;
  Tensor wrong_dtype = test::make_poisoned({4, 8}, other, impl.device);
  const Device elsewhere = impl.device.is_cpu() ? Device::cuda(0) : Device::cpu();
  Tensor wrong_device = Tensor::view(y.data(), impl.dtype, elsewhere, {4, 8});  // never dereferenced
  Tensor strided = Tensor::view(x.data(), impl.dtype, impl.device, {4, 4}, {8, 2});
  Tensor strided_y = Tensor::view(y.data(), impl.dtype, impl.device, {4, 4}, {8, 2});
  EXPECT_ERROR_CONTAINS(gelu_tanh_forward(x, wrong_shape), "gelu_tanh_forward: y.shape");
  EXPECT_ERROR_CONTAINS(gelu_tanh_forward(x, flat), "gelu_tanh_forward: y.shape");
  EXPECT_ERROR_CONTAINS(gelu_tanh_forward(x, wrong_dtype), "gelu_tanh_forward: y.dtype");
  EXPECT_ERROR_CONTAINS(gelu_tanh_forward(x, wrong_device), "gelu_tanh_forward: y.device");
  EXPECT_ERROR_CONTAINS(gelu_tanh_forward(strided, strided_y), "gelu_tanh_forward: x.strides");
  EXPECT_ERROR_CONTAINS(gelu_tanh_backward(x, wrong_dtype, y), "gelu_tanh_backward: dy.dtype");
  EXPECT_ERROR_CONTAINS(silu_forward(x, wrong_shape), "silu_forward: y.shape");
  EXPECT_ERROR_CONTAINS(silu_backward(x, x, wrong_device), "silu_backward: dx.device");
  EXPECT_ERROR_CONTAINS(swiglu_forward(x, wrong_shape, y), "swiglu_forward: up.shape");
  EXPECT_ERROR_CONTAINS(swiglu_forward(x, x, strided_y), "swiglu_forward: out.shape");
  EXPECT_ERROR_CONTAINS(swiglu_backward(x, x, x, y, wrong_dtype), "swiglu_backward: dup.dtype");
  EXPECT_ERROR_CONTAINS(swiglu_backward(x, wrong_device, x, y, y), "swiglu_backward: up.device");
  try {
    swiglu_forward(x, wrong_shape, y);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "swiglu_forward: up.shape: expected [4, 8], got [4, 9]");
  }
}

TEST(ActivationOp, RejectsUnsupportedDtype) {
  Tensor x = test::make_poisoned({2, 2}, DType::i32, Device::cpu());
  EXPECT_FALSE(activation_supported(Device::cpu(), DType::i32));
  EXPECT_ERROR_CONTAINS(silu_forward(x, x), "silu_forward: x.dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, ActivationOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
