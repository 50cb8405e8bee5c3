// ignis.attention_decode: one query per sequence over a KV cache read in place (split-K kernel).
#include <nanobind/stl/optional.h>

#include <cmath>

#include "common.h"
#include "ignis/ops/attention_decode.h"

namespace ignis::python {
namespace {

nb::object attention_decode(nb::handle q_arg, nb::handle k_arg, nb::handle v_arg, nb::handle seqlens_arg,
                            std::optional<double> scale, std::optional<std::uintptr_t> stream) {
  constexpr const char* op = "attention_decode";
  const Array q = array_arg(q_arg, op, "q"), k = array_arg(k_arg, op, "k_cache"), v = array_arg(v_arg, op, "v_cache");
  const Array seqlens = array_arg(seqlens_arg, op, "seqlens_k");
  const Array o = empty_like(q, q.tensor.shape(), q.tensor.dtype(), op, "q.dtype");
  AttentionParams params;
  params.scale = scale.value_or(0.0);  // 0: 1 / sqrt(head_dim)
  params.causal = true;
  run_op(q, stream, [&](Stream s) {
    attention_decode_forward(q.tensor, k.tensor, v.tensor, seqlens.tensor, o.tensor, params, s);
  });
  return o.object;
}

}  // namespace

void bind_attention_decode(nb::module_& m) {
  m.def("attention_decode", &attention_decode, nb::arg("q"), nb::arg("k_cache"), nb::arg("v_cache"),
        nb::arg("seqlens_k"), nb::arg("scale") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
        "o = softmax(scale * q k^T) v for one query per sequence over the first seqlens_k[b] rows of a KV\n"
        "cache, read in place (split-K flash decoding; CUDA float32, float16, bfloat16).\n"
        "q: [batch, 1, heads_q, head_dim]; k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim] with\n"
        "heads_q a multiple of heads_kv (GQA); seqlens_k: [batch] int32 on the GPU (clamped to\n"
        "[0, max_seqlen]; 0 gives o = 0). head_dim a multiple of 8 up to 256; scale defaults to\n"
        "1/sqrt(head_dim). o like q.");
}

}  // namespace ignis::python
