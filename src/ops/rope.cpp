// RoPE dispatcher: validates arguments, then picks the CPU or CUDA implementation.
#include "cpu/rope.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/rope.h"
#endif

namespace ignis {

bool rope_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

namespace {

// x, y: [batch, seqlen, heads, head_dim]; inv_freq: [rotary_dim / 2]; args.batch_offsets: [batch].
void validate(const Tensor& x, const Tensor& inv_freq, const Tensor& y, const RopeArgs& args, const char* where,
              const char* x_name, const char* y_name) {
  check_dim(x, 4, where, x_name);
  check_contiguous(x, where, x_name);
  check_arg(rope_supported(x.device(), x.dtype()), where, detail::lazy_concat(x_name, ".dtype on ", x.device()),
            x.device().is_cpu() ? "f32" : "f32, f16 or bf16", x.dtype());
  check_shape(y, x.shape(), where, y_name);
  check_dtype(y, x.dtype(), where, y_name);
  check_device(y, x.device(), where, y_name);
  check_contiguous(y, where, y_name);

  const std::int64_t head_dim = x.size(3);
  check_arg(args.rotary_dim > 0 && args.rotary_dim % 2 == 0 && args.rotary_dim <= head_dim, where,
            "args.rotary_dim", detail::lazy_concat("even, in (0, head_dim = ", head_dim, "]"), args.rotary_dim);
  check_arg(args.position_offset >= 0, where, "args.position_offset", ">= 0", args.position_offset);
  check_shape(inv_freq, {args.rotary_dim / 2}, where, "inv_freq");
  check_dtype(inv_freq, DType::f32, where, "inv_freq");
  check_device(inv_freq, x.device(), where, "inv_freq");
  check_contiguous(inv_freq, where, "inv_freq");
  if (args.batch_offsets) {
    const Tensor& offsets = *args.batch_offsets;
    check_shape(offsets, {x.size(0)}, where, "args.batch_offsets");
    check_dtype(offsets, DType::i32, where, "args.batch_offsets");
    check_device(offsets, x.device(), where, "args.batch_offsets");
    check_contiguous(offsets, where, "args.batch_offsets");
  }
}

// x, y: [batch, seqlen, heads, head_dim]; inv_freq: [rotary_dim / 2].
void apply(const Tensor& x, const Tensor& inv_freq, const Tensor& y, const RopeArgs& args, float sin_sign,
           [[maybe_unused]] Stream stream) {
  if (x.device().is_cpu()) {
    const cpu::RopeLayout layout{x.size(0), x.size(1), x.size(2), x.size(3), args.rotary_dim,
                                 args.style == RopeStyle::interleaved};
    cpu::rope_f32(x.data_as<const float>(), y.data_as<float>(), inv_freq.data_as<const float>(),
                  args.batch_offsets ? args.batch_offsets->data_as<const std::int32_t>() : nullptr,
                  args.position_offset, layout, args.attention_factor, sin_sign);
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::rope(x, inv_freq, y, args, sin_sign, stream);
#endif
}

}  // namespace

void rope_forward(const Tensor& x, const Tensor& inv_freq, const Tensor& y, const RopeArgs& args, Stream stream) {
  validate(x, inv_freq, y, args, "rope_forward", "x", "y");
  apply(x, inv_freq, y, args, 1.0f, stream);
}

void rope_backward(const Tensor& dy, const Tensor& inv_freq, const Tensor& dx, const RopeArgs& args,
                   Stream stream) {
  validate(dy, inv_freq, dx, args, "rope_backward", "dy", "dx");
  apply(dy, inv_freq, dx, args, -1.0f, stream);
}

}  // namespace ignis
