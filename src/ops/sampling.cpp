// Sampling dispatcher: validates arguments, derives the fixed-point plan, then calls CPU or CUDA.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/sampling.h"
#include "ignis/ops.h"
#include "ops/sampling_rule.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/sampling.h"
#endif

namespace ignis {

bool sampling_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

// logits: [rows, vocab].
static void check_logits(const Tensor& logits, const char* where) {
  check_dim(logits, 2, where, "logits");
  check_contiguous(logits, where, "logits");
  check_arg(sampling_supported(logits.device(), logits.dtype()), where,
            detail::lazy_concat("logits.dtype on ", logits.device()),
            logits.device().is_cpu() ? "f32" : "f32, f16 or bf16", logits.dtype());
  check_arg(logits.size(1) <= (std::int64_t{1} << 30), where, "vocab", "<= 2^30 (ids are i32)",
            logits.size(1));
}

// out, logits: [rows, vocab].
static void check_out(const Tensor& out, const Tensor& logits, const char* where) {
  check_dim(out, 2, where, "out");
  check_contiguous(out, where, "out");
  check_shape(out, logits.shape(), where, "out");
  check_dtype(out, logits.dtype(), where, "out");
  check_device(out, logits.device(), where, "out");
}

static void check_top_p(double p, const char* where) {
  check_arg(p > 0.0 && p <= 1.0, where, "top_p", "a value in (0, 1]", p);
}

// A CPU mask that keeps every token is a copy (the CUDA launchers copy on their stream).
// logits, out: [rows, vocab] f32.
static void copy_rows(const Tensor& logits, const Tensor& out) {
  if (logits.data() != out.data()) std::copy_n(logits.data_as<const float>(), logits.numel(), out.data_as<float>());
}

void top_k_mask(const Tensor& logits, std::int64_t k, const Tensor& out, Stream stream) {
  constexpr const char* where = "top_k_mask";
  check_logits(logits, where);
  check_out(out, logits, where);
  check_arg(k >= 0, where, "k", ">= 0 (0 keeps every token)", k);
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  if (logits.numel() == 0) return;
  const std::int64_t keep = k >= vocab ? 0 : k;  // 0: keep every token
  if (logits.device().is_cpu()) {
    if (keep == 0) return copy_rows(logits, out);
    return cpu::top_k_mask_f32(logits.data_as<const float>(), out.data_as<float>(), rows, vocab, keep);
  }
#if IGNIS_WITH_CUDA
  cuda::top_k_mask(logits, keep, out, stream);
#endif
}

void top_p_mask(const Tensor& logits, double p, const Tensor& out, Stream stream) {
  constexpr const char* where = "top_p_mask";
  check_logits(logits, where);
  check_out(out, logits, where);
  check_top_p(p, where);
  const std::uint64_t p_fixed = sampling::top_p_fixed(p);
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  if (logits.numel() == 0) return;
  if (logits.device().is_cpu()) {
    if (p_fixed >= sampling::kTopPOff) return copy_rows(logits, out);
    return cpu::top_p_mask_f32(logits.data_as<const float>(), out.data_as<float>(), rows, vocab, p_fixed);
  }
#if IGNIS_WITH_CUDA
  cuda::top_p_mask(logits, p_fixed, out, stream);
#endif
}

void sample(const Tensor& logits, const SamplingParams& params, const Tensor& ids, Stream stream) {
  constexpr const char* where = "sample";
  check_logits(logits, where);
  check_dim(ids, 1, where, "ids");
  check_contiguous(ids, where, "ids");
  check_shape(ids, {logits.size(0)}, where, "ids");
  check_dtype(ids, DType::i32, where, "ids");
  check_device(ids, logits.device(), where, "ids");
  check_arg(params.temperature >= 0.0 && std::isfinite(params.temperature), where, "temperature",
            "a finite value >= 0 (0 is greedy)", params.temperature);
  check_arg(params.top_k >= 0, where, "top_k", ">= 0 (0 keeps every token)", params.top_k);
  check_top_p(params.top_p, where);
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  check_arg(vocab > 0 || rows == 0, where, "vocab", "> 0", vocab);
  if (rows == 0) return;
  const auto plan =
      sampling::make_plan(params.temperature, params.top_k, params.top_p, params.seed, params.step, vocab);
  if (logits.device().is_cpu())
    return cpu::sample_f32(logits.data_as<const float>(), ids.data_as<std::int32_t>(), rows, vocab, plan);
#if IGNIS_WITH_CUDA
  cuda::sample(logits, plan, ids, stream);
#endif
}

}  // namespace ignis
