#pragma once
// Small pieces the forward passes of every model family share (mostly their CPU paths).
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "engine/kv_cache.h"
#include "engine/model_options.h"
#include "ignis/device.h"
#include "ignis/error.h"
#include "ignis/tensor.h"

namespace ignis::engine {

// A Tensor over engine scratch memory, for the ops that take Tensors.
// data: [shape...] f32.
inline Tensor cpu_view(const float* data, Shape shape) {
  return Tensor::view(const_cast<float*>(data), DType::f32, Device::cpu(), std::move(shape));
}

// x += y, elementwise over n values (the residual connections).
// x, y: [n].
inline void add_into(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// y: [rows, bias.size] += bias on every row.
inline void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) add_into(y + r * cols, bias, cols);
}

// The CUDA forwards take f32 or bf16 linear layers only (cuBLASLt has no q8 product): checked
// before the weights are read.
inline void check_device_format(const ModelOptions& options, const char* model) {
  if (options.device.is_cpu()) return;
  const WeightFormat f = options.weights.format;
  check_arg(f == WeightFormat::f32 || f == WeightFormat::bf16, model, "weights.format",
            detail::lazy_concat("f32 or bf16 on ", options.device), weight_format_name(f));
}

// The checks every forward(tokens, cache) starts with: some tokens, each in [0, vocab), and a
// cache of the model's geometry on the model's device.
// tokens: [n] ids.
inline void check_forward_inputs(const char* where, std::span<const std::int32_t> tokens, const KvCache& cache,
                                 std::int64_t n_layers, std::int64_t n_kv_heads, std::int64_t head_dim,
                                 std::int64_t vocab, const Device& device = Device::cpu()) {
  check_arg(!tokens.empty(), where, "tokens", "at least one token", 0);
  check_arg(cache.n_layers() == n_layers && cache.n_kv_heads() == n_kv_heads && cache.head_dim() == head_dim &&
                cache.device() == device,
            where, "cache", "a cache made by this model's make_cache", "another geometry or device");
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      fail_expected(where, "tokens[" + std::to_string(i) + "]", "an id in [0, " + std::to_string(vocab) + ")",
                    tokens[i]);
}

}  // namespace ignis::engine
