// ignis.cross_entropy: mean loss over non-pad rows and its gradient, in one pass.
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/cross_entropy.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;

nb::tuple cross_entropy(nb::handle logits_arg, nb::handle targets_arg, std::int64_t pad_id, bool grad,
                        nb::handle flag_arg, OptStream stream) {
  constexpr const char* op = "cross_entropy";
  const Array logits = array_arg(logits_arg, op, "logits"), targets = array_arg(targets_arg, op, "targets");
  const std::optional<Array> flag = optional_array_arg(flag_arg, op, "flag", /*writable=*/true);
  const DType dtype = logits.tensor.dtype();
  const Array loss = empty_like(logits, {1}, DType::f32, op, "loss");
  const std::optional<Array> dlogits =
      grad ? std::optional(empty_like(logits, logits.tensor.shape(), dtype, op, "logits.dtype")) : std::nullopt;
  run_op(logits, stream, [&](Stream s) {
    const bool native = cross_entropy_supported(logits.tensor.device(), dtype);
    CpuF32Staging f32 = dlogits ? CpuF32Staging(native, {logits.tensor, dlogits->tensor})
                                : CpuF32Staging(native, {logits.tensor});
    const Tensor grad_out = dlogits ? f32.out(dlogits->tensor) : Tensor();
    if (flag)
      cross_entropy_deferred(f32.in(logits.tensor), targets.tensor, pad_id, loss.tensor, grad_out, flag->tensor, {}, s);
    else
      ignis::cross_entropy(f32.in(logits.tensor), targets.tensor, pad_id, loss.tensor, grad_out, {}, s);
    f32.finish();
  });
  // A 0-d loss, as torch's; reading it is left to the caller (no synchronization here).
  return nb::make_tuple(loss.object.attr("reshape")(nb::tuple()), dlogits ? dlogits->object : nb::none());
}

void flag_op(void (*fn)(const Tensor&, Stream), const char* op, nb::handle flag_arg, OptStream stream) {
  const Array flag = writable_arg(flag_arg, op, "flag");
  run_op(flag, stream, [&](Stream s) { fn(flag.tensor, s); });
}

}  // namespace

void bind_cross_entropy(nb::module_& m) {
  m.def("cross_entropy", &cross_entropy, nb::arg("logits"), nb::arg("targets"), nb::arg("pad_id") = -100,
        nb::kw_only(), nb::arg("grad") = true, nb::arg("flag") = nb::none(), nb::arg("stream") = nb::none(),
        "(loss, dlogits): loss = mean over rows with targets[i] != pad_id of logsumexp(logits[i]) -\n"
        "logits[i, targets[i]] (a 0-d float32 array, 0 when every row is pad), as torch's\n"
        "cross_entropy(ignore_index=pad_id); dlogits = its gradient (logits' dtype), None when grad=False.\n"
        "logits: [n, vocab], targets: [n] int32 or int64. A target other than pad_id outside [0, vocab)\n"
        "raises ignis.Error (on a GPU after one synchronization). With `flag` (a [3] int64 array on the\n"
        "logits' device, set by cross_entropy_clear_flag) nothing waits: a bad target's row counts as pad\n"
        "and is recorded in flag, for cross_entropy_check_flag to raise later.");
  m.def(
      "cross_entropy_clear_flag",
      [](nb::handle flag, OptStream s) {
        flag_op(ignis::cross_entropy_clear_flag, "cross_entropy_clear_flag", flag, s);
      },
      nb::arg("flag"), nb::kw_only(), nb::arg("stream") = nb::none(), "Marks flag as holding no bad target.");
  m.def(
      "cross_entropy_check_flag",
      [](nb::handle flag, OptStream s) {
        flag_op(ignis::cross_entropy_check_flag, "cross_entropy_check_flag", flag, s);
      },
      nb::arg("flag"), nb::kw_only(), nb::arg("stream") = nb::none(),
      "Waits for the stream, then raises the error cross_entropy would have raised for the first bad\n"
      "target recorded.");
}

}  // namespace ignis::python
