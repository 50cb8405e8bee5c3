#include "cli/selfcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "ignis/ops.h"
#include "ref/softmax.h"

namespace ignis::cli {
namespace {

// Max |softmax(x) - ref| over a random [rows, cols] f32 problem on `device`.
double softmax_error(Device device, std::int64_t rows, std::int64_t cols) {
  std::mt19937_64 rng(1234);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);
  std::vector<float> y(x.size(), NAN);

  Tensor host_x = Tensor::view(x.data(), DType::f32, Device::cpu(), {rows, cols});
  Tensor host_y = Tensor::view(y.data(), DType::f32, Device::cpu(), {rows, cols});
  Tensor dev_x = host_x.to(device);
  Tensor dev_y = host_y.to(device);
  softmax_forward(dev_x, dev_y);
  if (device.is_cuda()) synchronize();
  copy_bytes(y.data(), Device::cpu(), dev_y.data(), device, dev_y.nbytes());

  const std::vector<double> x64(x.begin(), x.end());
  const std::vector<double> ref = ref::softmax_forward(x64, rows, cols);
  double err = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) err = std::max(err, std::isnan(y[i]) ? INFINITY : std::abs(y[i] - ref[i]));
  return err;
}

}  // namespace

int run_selfcheck(const std::string& device_name) {
  std::vector<Device> devices;
  if (device_name == "cpu" || device_name == "all") devices.push_back(Device::cpu());
  if (device_name == "cuda" || (device_name == "all" && cuda_available())) devices.push_back(Device::cuda(0));
  if (devices.empty()) devices.push_back(Device::parse(device_name));

  int failures = 0;
  for (const Device& device : devices) {
    const double err = softmax_error(device, 64, 1000);
    const bool ok = err < 1e-6;
    failures += ok ? 0 : 1;
    std::printf("%-6s softmax_forward f32 [64, 1000]  max abs error %.2e  %s\n", device.str().c_str(), err,
                ok ? "ok" : "FAILED");
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace ignis::cli
