// ignis.kv_cache_append: new key/value rows written behind each sequence's length, in place.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "common.h"
#include "ignis/ops/kv_cache.h"

namespace ignis::python {
namespace {

std::vector<std::int64_t> append(nb::handle k_cache_arg, nb::handle v_cache_arg, nb::handle k_new_arg,
                                 nb::handle v_new_arg, nb::handle lengths_arg,
                                 std::optional<std::vector<std::int64_t>> host_lengths,
                                 std::optional<std::uintptr_t> stream) {
  constexpr const char* op = "kv_cache_append";
  const Array k_cache = writable_arg(k_cache_arg, op, "k_cache"), v_cache = writable_arg(v_cache_arg, op, "v_cache");
  const Array k_new = array_arg(k_new_arg, op, "k_new"), v_new = array_arg(v_new_arg, op, "v_new");
  const Array lengths = writable_arg(lengths_arg, op, "lengths");
  // Without the caller's copy, read the device's (a synchronization on a GPU); lengths of the wrong
  // kind are left for the op to report.
  const Tensor& l = lengths.tensor;
  std::vector<std::int64_t> host;
  if (host_lengths) host = std::move(*host_lengths);
  else if (l.dim() == 1 && l.dtype() == DType::i32)
    host = nb::cast<std::vector<std::int64_t>>(lengths.object.attr("tolist")());
  run_op(k_cache, stream, [&](Stream s) {
    kv_cache_append(k_cache.tensor, v_cache.tensor, k_new.tensor, v_new.tensor, lengths.tensor, host, s);
  });
  return host;
}

}  // namespace

void bind_kv_cache(nb::module_& m) {
  m.def("kv_cache_append", &append, nb::arg("k_cache"), nb::arg("v_cache"), nb::arg("k_new"), nb::arg("v_new"),
        nb::arg("lengths"), nb::arg("host_lengths") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
        "Writes token t of sequence b at position lengths[b] + t of both caches, advances lengths (an int32\n"
        "array on the caches' device) and returns the new lengths as a list. k_cache, v_cache:\n"
        "[batch, max_seqlen, heads_kv, head_dim], updated in place; k_new, v_new: [batch, new_tokens,\n"
        "heads_kv, head_dim]. host_lengths: the caller's copy of lengths (read from lengths when None).\n"
        "Raises ignis.Error, writing nothing, when a sequence would pass max_seqlen.");
}

}  // namespace ignis::python
