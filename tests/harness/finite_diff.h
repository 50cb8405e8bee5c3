#pragma once
// Central finite differences in fp64, used to check every reference backward op: for a
// forward f and an upstream gradient g, the gradient of L(x) = sum(g * f(x)) with respect to x.
#include <cstddef>
#include <functional>
#include <vector>

namespace ignis::test {

using ForwardFn = std::function<std::vector<double>(const std::vector<double>&)>;

// d/dx_i sum_j g_j f_j(x), by (L(x + h e_i) - L(x - h e_i)) / 2h.
inline std::vector<double> numeric_vjp(const ForwardFn& f, std::vector<double> x, const std::vector<double>& g,
                                       double h = 1e-6) {
  auto loss = [&](const std::vector<double>& at) {
    const std::vector<double> y = f(at);
    double s = 0.0;
    for (std::size_t j = 0; j < y.size(); ++j) s += g[j] * y[j];
    return s;
  };
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss(x);
    x[i] = saved - h;
    const double down = loss(x);
    x[i] = saved;
    grad[i] = (up - down) / (2.0 * h);
  }
  return grad;
}

// Largest |a - b| / max(1, |b|): the finite-difference comparison metric.
inline double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = (a[i] > b[i] ? a[i] - b[i] : b[i] - a[i]) / (b[i] > 1.0 ? b[i] : (b[i] < -1.0 ? -b[i] : 1.0));
    if (d > worst || d != d) worst = d != d ? 1e300 : d;
  }
  return worst;
}

}  // namespace ignis::test
