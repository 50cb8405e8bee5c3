// Flash attention backward dispatcher: validates shapes, dtypes, devices, alignment and params, resolves the
// default scale, then calls the CUDA kernels (there is no CPU implementation of this op).
#include <utility>

#include "ignis/ops.h"
#include "ops/attention_check.h"
#include "ops/flash_check.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/flash_backward.h"
#endif

namespace ignis {

void flash_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const AttentionParams& params, Stream stream) {
  constexpr const char* where = "flash_attention_backward";
  check_arg(lse.defined(), where, "lse", "the forward's lse (defined)", "an undefined tensor");
  check_flash_tensors(q, k, v, o, lse, params, where);
  check_attention_tensor(dout, q, q.shape(), q.dtype(), where, "dout");
  check_attention_tensor(dq, q, q.shape(), q.dtype(), where, "dq");
  check_attention_tensor(dk, q, k.shape(), q.dtype(), where, "dk");
  check_attention_tensor(dv, q, k.shape(), q.dtype(), where, "dv");
  for (auto [t, name] : {std::pair{&dout, "dout"}, std::pair{&dq, "dq"}, std::pair{&dk, "dk"}, std::pair{&dv, "dv"}})
    check_flash_aligned(*t, where, name);
#if IGNIS_WITH_CUDA
  cuda::flash_attention_backward(dout, q, k, v, o, lse, dq, dk, dv, resolved_attention_params(params, q.size(3)),
                                 stream);
#else
  (void)stream;
#endif
}

}  // namespace ignis
