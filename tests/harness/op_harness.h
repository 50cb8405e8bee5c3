#pragma once
// The op test harness: builds tensors of any dtype/device from double values, poisons outputs,
// reads results back as double, and judges them against the fp64 reference with the
// tolerance rule of the project's design (docs/ARCHITECTURE.md, "Testing rule"):
//   f64: max error <= 1e-12 * scale;  f32: max error <= f32_rtol * scale (default 2e-6);
//   f16/bf16: max error <= 2 * (max error of the naive same-precision result) + floor * scale,
// where scale = max(magnitude, max |ref|) (magnitude defaults to 1; ops whose outputs cancel
// large terms pass the size of those terms) and every output element must have been written.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::test {

// One implementation of an op under test: where it runs and on which storage type.
struct Impl {
  Device device;
  DType dtype;
  std::string name() const;
};
std::ostream& operator<<(std::ostream& out, const Impl& impl);
// The gtest parameter name, e.g. "cuda_bf16".
std::string impl_param_name(const testing::TestParamInfo<Impl>& info);

// The implementations every op is tried on; tests skip those an op does not support.
std::vector<Impl> all_impls();

// True when IGNIS_TEST_LIGHT is set (scripts/gpu.sh sets it under compute-sanitizer, which runs
// kernels 10-100x slower): tests then drop their largest cases and keep every code path.
bool light_run();

// Sizes that catch tail handling and vector-width bugs.
inline const std::vector<std::int64_t> kOddSizes = {1, 3, 17, 113, 1023};

// Skips the current test (GTEST_SKIP) unless the impl's device exists and `supported` is true.
#define IGNIS_SKIP_UNLESS(impl, supported)                                                         \
  do {                                                                                             \
    if ((impl).device.is_cuda() && !::ignis::cuda_available()) GTEST_SKIP() << "no usable GPU";    \
    if (!(supported)) GTEST_SKIP() << (impl).name() << " is not implemented for this op";          \
  } while (0)

// A fresh generator per case: base seed (IGNIS_TEST_SEED or a fixed default) mixed with `salt`.
std::mt19937_64 case_rng(std::uint64_t salt);
std::vector<double> random_normal(std::mt19937_64& rng, std::size_t n, double stddev = 1.0);
std::vector<double> random_uniform(std::mt19937_64& rng, std::size_t n, double lo, double hi);

// Rounds one value through `dtype`.
double round_through(double v, DType dtype);
// Rounds every value through `dtype` (what a kernel of that dtype actually sees).
std::vector<double> quantize(const std::vector<double>& values, DType dtype);

// A tensor on `device` of `dtype` holding `values` (rounded to dtype).
Tensor make_tensor(const std::vector<double>& values, const Shape& shape, DType dtype, Device device);
// An output tensor filled with poison (NaN for floats, 0x5A bytes for integers).
Tensor make_poisoned(const Shape& shape, DType dtype, Device device);
// The tensor's contents as doubles (synchronizes the default stream first for GPU tensors).
std::vector<double> read_tensor(const Tensor& t);

struct Verdict {
  double max_error = 0;
  double allowed = 0;
  std::int64_t worst_index = -1;
  std::int64_t unwritten = 0;  // elements still NaN where the reference is not
};

// The error rule above. `naive` (same-precision naive result) is needed for f16/bf16 only.
Verdict judge(const std::vector<double>& got, const std::vector<double>& ref, DType dtype,
              const std::vector<double>& naive = {}, double f32_rtol = 2e-6, double floor = 1e-5,
              double magnitude = 1.0);

// gtest assertion form of judge(); `what` names the output in the failure message.
testing::AssertionResult close_to_reference(const std::vector<double>& got, const std::vector<double>& ref,
                                            DType dtype, const std::vector<double>& naive = {},
                                            double f32_rtol = 2e-6, double floor = 1e-5,
                                            double magnitude = 1.0);

}  // namespace ignis::test
