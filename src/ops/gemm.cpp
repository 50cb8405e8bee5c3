// GEMM dispatcher: validates the operands, then runs the CPU loops or the CUDA tiled kernel.
#include "cpu/gemm.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/gemm.h"
#endif

namespace ignis {

bool gemm_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && is_floating(dtype);
}

namespace {

struct Dims {
  std::int64_t batch, m, n, k;
};

// a: [batch, m, k], b: [batch, k, n] ([batch, n, k] when trans_b), c: [batch, m, n]; or all without batch.
Dims check_operands(const Tensor& a, const Tensor& b, const Tensor& c, bool trans_b, const char* where) {
  check_arg(a.dim() == 2 || a.dim() == 3, where, "a.dim", "2 or 3", a.dim());
  const bool batched = a.dim() == 3;
  check_dim(b, a.dim(), where, "b");
  check_dim(c, a.dim(), where, "c");
  for (const auto& [t, name] : {std::pair{&a, "a"}, std::pair{&b, "b"}, std::pair{&c, "c"}}) {
    check_contiguous(*t, where, name);
    check_dtype(*t, a.dtype(), where, name);
    check_device(*t, a.device(), where, name);
  }
  check_arg(gemm_supported(a.device(), a.dtype()), where, detail::lazy_concat("dtype on ", a.device()),
            a.device().is_cpu() ? "f32" : "f64, f32, f16 or bf16", a.dtype());
  const Dims d{batched ? a.size(0) : 1, a.size(-2), trans_b ? b.size(-2) : b.size(-1), a.size(-1)};
  auto shape = [&](std::int64_t rows, std::int64_t cols) {
    return batched ? Shape{d.batch, rows, cols} : Shape{rows, cols};
  };
  check_shape(b, trans_b ? shape(d.n, d.k) : shape(d.k, d.n), where, "b");
  check_shape(c, shape(d.m, d.n), where, "c");
  return d;
}

// a, b, c: as check_operands'.
void run(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta, bool trans_b,
         [[maybe_unused]] Stream stream) {
  const char* where = trans_b ? "gemm_nt" : "gemm_nn";
  const Dims d = check_operands(a, b, c, trans_b, where);
  if (a.device().is_cpu()) {
    const auto run_cpu = trans_b ? cpu::gemm_nt_f32 : cpu::gemm_nn_f32;
    run_cpu(a.data_as<const float>(), b.data_as<const float>(), c.data_as<float>(), d.batch, d.m, d.n, d.k,
            static_cast<float>(alpha), static_cast<float>(beta));
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::GemmProblem p;
  p.m = d.m;
  p.n = d.n;
  p.k = d.k;
  p.batch = d.batch;
  p.trans_b = trans_b;
  p.a = {a.data(), d.k, d.m * d.k, 0, 1};
  p.b = {b.data(), trans_b ? d.k : d.n, d.k * d.n, 0, 1};
  p.c = {c.data(), d.n, d.m * d.n, 0, 1};
  p.alpha = alpha;
  p.beta = beta;
  cuda::gemm(p, a.dtype(), stream);
#endif
}

}  // namespace

void gemm_nn(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta, Stream stream) {
  run(a, b, c, alpha, beta, false, stream);
}

void gemm_nt(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta, Stream stream) {
  run(a, b, c, alpha, beta, true, stream);
}

}  // namespace ignis
