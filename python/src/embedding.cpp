// ignis.embedding (a row gather) and ignis.embedding_backward (its scatter-add).
#include <nanobind/stl/optional.h>

#include "common.h"
#include "ignis/ops/embedding.h"

namespace ignis::python {
namespace {

using OptStream = std::optional<std::uintptr_t>;

nb::object embedding(nb::handle table_arg, nb::handle ids_arg, OptStream stream) {
  constexpr const char* op = "embedding";
  const Array table = array_arg(table_arg, op, "table"), ids = array_arg(ids_arg, op, "ids");
  const DType dtype = table.tensor.dtype();
  const Array out = empty_like(table, {extent(ids.tensor, 0), extent(table.tensor, 1)}, dtype, op, "table.dtype");
  run_op(table, stream, [&](Stream s) {
    CpuF32Staging f32(embedding_supported(table.tensor.device(), dtype), {table.tensor, out.tensor});
    embedding_forward(f32.in(table.tensor), ids.tensor, f32.out(out.tensor), s);
    f32.finish();
  });
  return out.object;
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
  m.def("embedding", &embedding, nb::arg("table"), nb::arg("ids"), nb::kw_only(), nb::arg("stream") = nb::none(),
        "out[i] = table[ids[i]]. table: [vocab, dim], ids: [n] int32 or int64 -> [n, dim]. An id outside\n"
        "[0, vocab) raises ignis.Error naming it (on a GPU after one synchronization).");
  m.def("embedding_backward", &embedding_backward, nb::arg("dout"), nb::arg("ids"), nb::arg("num_embeddings"),
        nb::kw_only(), nb::arg("stream") = nb::none(),
        "dtable[v] = sum of dout[i] over the i with ids[i] = v: [num_embeddings, dim], deterministic.\n"
        "dout: [n, dim], ids: [n] int32 or int64.");
}

}  // namespace ignis::python
