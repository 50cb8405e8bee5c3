#include "harness/op_harness.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "harness/max_error.h"
#include "ignis/float16.h"
#include "ignis/ops.h"

namespace ignis::test {

std::string Impl::name() const { return detail::concat(device.is_cpu() ? "cpu" : "cuda", "_", dtype); }

std::ostream& operator<<(std::ostream& out, const Impl& impl) { return out << impl.name(); }

std::string impl_param_name(const testing::TestParamInfo<Impl>& info) { return info.param.name(); }

std::vector<Impl> all_impls() {
  std::vector<Impl> impls;
  for (Device device : {Device::cpu(), Device::cuda(0)})
    for (DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16}) impls.push_back({device, dtype});
  return impls;
}

bool light_run() {
  const char* env = std::getenv("IGNIS_TEST_LIGHT");
  return env != nullptr && *env != '\0' && *env != '0';
}

std::mt19937_64 case_rng(std::uint64_t salt) {
  std::uint64_t base = 0x1915'2026;
  if (const char* env = std::getenv("IGNIS_TEST_SEED")) base = std::strtoull(env, nullptr, 0);
  std::seed_seq seq{static_cast<std::uint32_t>(base), static_cast<std::uint32_t>(base >> 32),
                    static_cast<std::uint32_t>(salt), static_cast<std::uint32_t>(salt >> 32)};
  return std::mt19937_64(seq);
}

std::vector<double> random_normal(std::mt19937_64& rng, std::size_t n, double stddev) {
  std::normal_distribution<double> dist(0.0, stddev);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

std::vector<double> random_uniform(std::mt19937_64& rng, std::size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

double round_through(double v, DType dtype) {
  switch (dtype) {
    case DType::f64: return v;
    case DType::f32: return static_cast<float>(v);
    case DType::f16: return f16_bits_to_float(float_to_f16_bits(static_cast<float>(v)));
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v)));
    case DType::i32: return static_cast<double>(static_cast<std::int32_t>(v));
    case DType::i64: return static_cast<double>(static_cast<std::int64_t>(v));
    case DType::u8: return static_cast<double>(static_cast<std::uint8_t>(v));
  }
  return v;
}

std::vector<double> quantize(const std::vector<double>& values, DType dtype) {
  std::vector<double> out(values.size());
  std::transform(values.begin(), values.end(), out.begin(), [dtype](double v) { return round_through(v, dtype); });
  return out;
}

Tensor make_tensor(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  Tensor host = Tensor::empty(shape, dtype, Device::cpu());
  check_arg(static_cast<std::int64_t>(values.size()) == host.numel(), "make_tensor", "values.size()", host.numel(),
            values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    switch (dtype) {
      case DType::f64: host.data_as<double>()[i] = v; break;
      case DType::f32: host.data_as<float>()[i] = static_cast<float>(v); break;
      case DType::f16: host.data_as<std::uint16_t>()[i] = float_to_f16_bits(static_cast<float>(v)); break;
      case DType::bf16: host.data_as<std::uint16_t>()[i] = float_to_bf16_bits(static_cast<float>(v)); break;
      case DType::i32: host.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(v); break;
      case DType::i64: host.data_as<std::int64_t>()[i] = static_cast<std::int64_t>(v); break;
      case DType::u8: host.data_as<std::uint8_t>()[i] = static_cast<std::uint8_t>(v); break;
    }
  }
  return device.is_cpu() ? host : host.to(device);
}

Tensor make_poisoned(const Shape& shape, DType dtype, Device device) {
  Tensor host = Tensor::empty(shape, dtype, Device::cpu());
  if (is_floating(dtype)) {
    // 0xFF bytes are a NaN in every floating format.
    std::memset(host.data(), 0xFF, host.nbytes());
  } else {
    std::memset(host.data(), 0x5A, host.nbytes());
  }
  return device.is_cpu() ? host : host.to(device);
}

std::vector<double> read_tensor(const Tensor& t) {
  Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
  std::vector<double> out(static_cast<std::size_t>(host.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    switch (host.dtype()) {
      case DType::f64: out[i] = host.data_as<double>()[i]; break;
      case DType::f32: out[i] = host.data_as<float>()[i]; break;
      case DType::f16: out[i] = f16_bits_to_float(host.data_as<std::uint16_t>()[i]); break;
      case DType::bf16: out[i] = bf16_bits_to_float(host.data_as<std::uint16_t>()[i]); break;
      case DType::i32: out[i] = host.data_as<std::int32_t>()[i]; break;
      case DType::i64: out[i] = static_cast<double>(host.data_as<std::int64_t>()[i]); break;
      case DType::u8: out[i] = host.data_as<std::uint8_t>()[i]; break;
    }
  }
  return out;
}

// max |a - ref| (take_worse: a NaN is an infinite error), and in *worst the index where it first occurs.
static double worst_abs_error(const std::vector<double>& a, const std::vector<double>& ref, std::int64_t* worst) {
  double err = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(ref[i]) && std::isnan(a[i])) continue;
    // Infinities must match exactly; a mismatch counts as an infinite error.
    const double e = (std::isinf(ref[i]) || std::isinf(a[i])) ? (a[i] == ref[i] ? 0.0 : INFINITY)
                                                               : std::abs(a[i] - ref[i]);
    const double before = err;
    take_worse(err, e);
    if (worst && err != before) *worst = static_cast<std::int64_t>(i);
  }
  return err;
}

Verdict judge(const std::vector<double>& got, const std::vector<double>& ref, DType dtype,
              const std::vector<double>& naive, double f32_rtol, double floor, double magnitude) {
  Verdict v;
  double scale = magnitude;
  for (double r : ref)
    if (std::isfinite(r)) scale = std::max(scale, std::abs(r));
  for (std::size_t i = 0; i < got.size() && i < ref.size(); ++i)
    if (std::isnan(got[i]) && !std::isnan(ref[i])) ++v.unwritten;
  v.max_error = worst_abs_error(got, ref, &v.worst_index);
  switch (dtype) {
    case DType::f64: v.allowed = 1e-12 * scale; break;
    case DType::f32: v.allowed = f32_rtol * scale; break;
    case DType::f16:
    case DType::bf16: v.allowed = 2.0 * worst_abs_error(naive, ref, nullptr) + floor * scale; break;
    default: v.allowed = 0.0; break;
  }
  return v;
}

testing::AssertionResult close_to_reference(const std::vector<double>& got, const std::vector<double>& ref,
                                            DType dtype, const std::vector<double>& naive, double f32_rtol,
                                            double floor, double magnitude) {
  if (got.size() != ref.size())
    return testing::AssertionFailure() << "output has " << got.size() << " elements, reference " << ref.size();
  if ((dtype == DType::f16 || dtype == DType::bf16) && naive.size() != ref.size())
    return testing::AssertionFailure() << "a " << dtype << " check needs the naive same-precision result";
  const Verdict v = judge(got, ref, dtype, naive, f32_rtol, floor, magnitude);
  if (v.unwritten > 0)
    return testing::AssertionFailure() << v.unwritten << " of " << got.size()
                                       << " output elements are NaN (never written?), first bad index "
                                       << v.worst_index;
  if (!(v.max_error <= v.allowed))
    return testing::AssertionFailure() << dtype << " max error " << v.max_error << " > allowed " << v.allowed
                                       << " at index " << v.worst_index << " (got " << got[v.worst_index]
                                       << ", reference " << ref[v.worst_index] << ")";
  return testing::AssertionSuccess() << "max error " << v.max_error << " <= " << v.allowed;
}

}  // namespace ignis::test
