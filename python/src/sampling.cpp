// ignis.top_k_mask, ignis.top_p_mask and ignis.sample over [rows, vocab] logits.
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/sampling.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;

// fn(logits, out, stream) into a new array like logits.
template <class Fn>
nb::object masked(const char* op, nb::handle logits_arg, OptStream stream, Fn&& fn) {
  const Array logits = array_arg(logits_arg, op, "logits");
  const DType dtype = logits.tensor.dtype();
  const Array out = empty_like(logits, logits.tensor.shape(), dtype, op, "logits.dtype");
  run_op(logits, stream, [&](Stream s) {
    CpuF32Staging f32(sampling_supported(logits.tensor.device(), dtype), {logits.tensor, out.tensor});
    fn(f32.in(logits.tensor), f32.out(out.tensor), s);
    f32.finish();
  });
  return out.object;
}

nb::object top_k(nb::handle logits, std::int64_t k, OptStream stream) {
  return masked("top_k_mask", logits, stream,
                [k](const Tensor& x, const Tensor& y, Stream s) { top_k_mask(x, k, y, s); });
}

nb::object top_p(nb::handle logits, double p, OptStream stream) {
  return masked("top_p_mask", logits, stream,
                [p](const Tensor& x, const Tensor& y, Stream s) { top_p_mask(x, p, y, s); });
}

nb::object sample_ids(nb::handle logits_arg, double temperature, std::int64_t top_k, double top_p,
                      std::uint64_t seed, std::uint64_t step, OptStream stream) {
  constexpr const char* op = "sample";
  const Array logits = array_arg(logits_arg, op, "logits");
  const DType dtype = logits.tensor.dtype();
  const Array ids = empty_like(logits, {extent(logits.tensor, 0)}, DType::i32, op, "ids");
  const SamplingParams params{temperature, top_k, top_p, seed, step};
  run_op(logits, stream, [&](Stream s) {
    CpuF32Staging f32(sampling_supported(logits.tensor.device(), dtype), {logits.tensor});
    sample(f32.in(logits.tensor), params, ids.tensor, s);
  });
  return ids.object;
}

}  // namespace

void bind_sampling(nb::module_& m) {
  m.def("top_k_mask", &top_k, nb::arg("logits"), nb::arg("k"), nb::kw_only(), nb::arg("stream") = nb::none(),
        "logits with all but the k largest of each row set to -inf (exactly min(k, vocab) survive, ties to\n"
        "the lower index; k = 0 keeps every token). logits: [rows, vocab].");
  m.def("top_p_mask", &top_p, nb::arg("logits"), nb::arg("p"), nb::kw_only(), nb::arg("stream") = nb::none(),
        "logits with -inf outside the shortest prefix of each row (largest first) whose softmax mass reaches p\n"
        "(at least one token survives; p = 1 keeps every token). logits: [rows, vocab].");
  m.def("sample", &sample_ids, nb::arg("logits"), nb::arg("temperature") = 1.0, nb::arg("top_k") = 0,
        nb::arg("top_p") = 1.0, nb::arg("seed") = 0, nb::arg("step") = 0, nb::kw_only(),
        nb::arg("stream") = nb::none(),
        "One token id per row ([rows] int32): temperature (0 is greedy), then top-k, then top-p, then a\n"
        "draw from the counter-based generator of (seed, step, row). The CPU and every GPU return the same\n"
        "ids for the same logits. logits: [rows, vocab].");
}

}  // namespace ignis::python
