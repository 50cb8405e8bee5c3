// ignis.cross_entropy: mean loss over non-pad rows and its gradient, in one pass.
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/cross_entropy.h"

namespace ignis::python {
namespace {

nb::tuple cross_entropy(nb::handle logits_arg, nb::handle targets_arg, std::int64_t pad_id, bool grad,
                        std::optional<std::uintptr_t> stream) {
  constexpr const char* op = "cross_entropy";
  const Array logits = array_arg(logits_arg, op, "logits"), targets = array_arg(targets_arg, op, "targets");
  const DType dtype = logits.tensor.dtype();
  const Array loss = empty_like(logits, {1}, DType::f32, op, "loss");
  const std::optional<Array> dlogits =
      grad ? std::optional(empty_like(logits, logits.tensor.shape(), dtype, op, "logits.dtype")) : std::nullopt;
  run_op(logits, stream, [&](Stream s) {
    const bool native = cross_entropy_supported(logits.tensor.device(), dtype);
    CpuF32Staging f32 = dlogits ? CpuF32Staging(native, {logits.tensor, dlogits->tensor})
                                : CpuF32Staging(native, {logits.tensor});
    ignis::cross_entropy(f32.in(logits.tensor), targets.tensor, pad_id, loss.tensor,
                         dlogits ? f32.out(dlogits->tensor) : Tensor(), {}, s);
    f32.finish();
  });
  // A 0-d loss, as torch's; reading it is left to the caller (no synchronization here).
  return nb::make_tuple(loss.object.attr("reshape")(nb::tuple()), dlogits ? dlogits->object : nb::none());
}

}  // namespace

void bind_cross_entropy(nb::module_& m) {
  m.def("cross_entropy", &cross_entropy, nb::arg("logits"), nb::arg("targets"), nb::arg("pad_id") = -100,
        nb::kw_only(), nb::arg("grad") = true, nb::arg("stream") = nb::none(),
        "(loss, dlogits): loss = mean over rows with targets[i] != pad_id of logsumexp(logits[i]) -\n"
        "logits[i, targets[i]] (a 0-d float32 array, 0 when every row is pad), as torch's\n"
        "cross_entropy(ignore_index=pad_id); dlogits = its gradient (logits' dtype), None when grad=False.\n"
        "logits: [n, vocab], targets: [n] int32 or int64. A target other than pad_id outside [0, vocab)\n"
        "raises ignis.Error (on a GPU after one synchronization).");
}

}  // namespace ignis::python
