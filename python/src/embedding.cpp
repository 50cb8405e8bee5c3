// ignis.embedding (a row gather) and ignis.embedding_backward (its scatter-add).
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/embedding.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;

nb::object embedding(nb::handle table_arg, nb::handle ids_arg, nb::handle flag_arg, OptStream stream) {
  constexpr const char* op = "embedding";
  const Array table = array_arg(table_arg, op, "table"), ids = array_arg(ids_arg, op, "ids");
  const std::optional<Array> flag = optional_array_arg(flag_arg, op, "flag", /*writable=*/true);
  const DType dtype = table.tensor.dtype();
  const Array out = empty_like(table, {extent(ids.tensor, 0), extent(table.tensor, 1)}, dtype, op, "table.dtype");
  run_op(table, stream, [&](Stream s) {
    CpuF32Staging f32(embedding_supported(table.tensor.device(), dtype), {table.tensor, out.tensor});
    if (flag)
      embedding_forward_deferred(f32.in(table.tensor), ids.tensor, f32.out(out.tensor), flag->tensor, s);
    else
      embedding_forward(f32.in(table.tensor), ids.tensor, f32.out(out.tensor), s);
    f32.finish();
  });
  return out.object;
}

void flag_op(void (*fn)(const Tensor&, Stream), const char* op, nb::handle flag_arg, OptStream stream) {
  const Array flag = writable_arg(flag_arg, op, "flag");
  run_op(flag, stream, [&](Stream s) { fn(flag.tensor, s); });
}

nb::object embedding_backward(nb::handle dout_arg, nb::handle ids_arg, std::int64_t num_embeddings,
                              OptStream stream) {
  constexpr const char* op = "embedding_backward";
  const Array dout = array_arg(dout_arg, op, "dout"), ids = array_arg(ids_arg, op, "ids");
  check_arg(num_embeddings >= 0, op, "num_embeddings", ">= 0", num_embeddings);
  const DType dtype = dout.tensor.dtype();
  const Array dtable = empty_like(dout, {num_embeddings, extent(dout.tensor, 1)}, dtype, op, "dout.dtype");
  run_op(dout, stream, [&](Stream s) {
    CpuF32Staging f32(embedding_supported(dout.tensor.device(), dtype), {dout.tensor, dtable.tensor});
    ignis::embedding_backward(f32.in(dout.tensor), ids.tensor, f32.out(dtable.tensor), s);
    f32.finish();
  });
  return dtable.object;
}

}  // namespace

void bind_embedding(nb::module_& m) {
  m.def("embedding", &embedding, nb::arg("table"), nb::arg("ids"), nb::kw_only(), nb::arg("flag") = nb::none(),
        nb::arg("stream") = nb::none(),
        "out[i] = table[ids[i]]. table: [vocab, dim], ids: [n] int32 or int64 -> [n, dim]. An id outside\n"
        "[0, vocab) raises ignis.Error naming it (on a GPU after one synchronization). With `flag` (a [3]\n"
        "int64 array on the ids' device, set by embedding_clear_flag) nothing waits: a bad id gives a zero\n"
        "row and is recorded in flag, for embedding_check_flag to raise later.");
  m.def(
      "embedding_clear_flag",
      [](nb::handle flag, OptStream s) { flag_op(ignis::embedding_clear_flag, "embedding_clear_flag", flag, s); },
      nb::arg("flag"), nb::kw_only(), nb::arg("stream") = nb::none(), "Marks flag as holding no bad id.");
  m.def(
      "embedding_check_flag",
      [](nb::handle flag, OptStream s) { flag_op(ignis::embedding_check_flag, "embedding_check_flag", flag, s); },
      nb::arg("flag"), nb::kw_only(), nb::arg("stream") = nb::none(),
      "Waits for the stream, then raises the error embedding would have raised for the first bad id recorded.");
  m.def("embedding_backward", &embedding_backward, nb::arg("dout"), nb::arg("ids"), nb::arg("num_embeddings"),
        nb::kw_only(), nb::arg("stream") = nb::none(),
        "dtable[v] = sum of dout[i] over the i with ids[i] = v: [num_embeddings, dim], deterministic.\n"
        "dout: [n, dim], ids: [n] int32 or int64.");
}

}  // namespace ignis::python
