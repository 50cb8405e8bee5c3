#include "engine/llama_model.h"

#include <cmath>
#include <string>

#include "engine/cuda_llama.h"
#include "engine/cpu_forward.h"
#include "ignis/error.h"
#include "ignis/ops/activation.h"
#include "ignis/ops/norm.h"
#include "ignis/ops/rope.h"

namespace ignis::engine {

std::unique_ptr<LlamaModel> LlamaModel::load(const model::GgufFile& file, const ModelOptions& options) {
  check_device_format(options, "LlamaModel");
  LlamaConfig config = LlamaConfig::from_gguf(file);
  LlamaWeights weights = LlamaWeights::load(file, config, options.weights);
  return std::make_unique<LlamaModel>(std::move(config), std::move(weights), options);
}

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights, const ModelOptions& options)
    : DecoderModel(options, "LlamaModel"), config_(std::move(config)), weights_(std::move(weights)) {
  config_.validate();
  check_arg(static_cast<std::int64_t>(weights_.layers.size()) == config_.n_layers, "LlamaModel", "weights.layers",
            config_.n_layers, weights_.layers.size());
  options_.weights.qk_order = weights_.qk_order;
  inv_freq_ = rope_inv_freq(config_.rotary_dim, config_.rope_theta, config_.rope_scaling);
  if (!weights_.rope_freq_factors.empty()) {
    check_arg(weights_.rope_freq_factors.size() == inv_freq_.size(), "LlamaModel", "rope_freq_factors.size",
              inv_freq_.size(), weights_.rope_freq_factors.size());
    for (std::size_t i = 0; i < inv_freq_.size(); ++i) inv_freq_[i] /= weights_.rope_freq_factors[i];
  }
  rope_factor_ = rope_attention_factor(config_.rope_scaling);
  if (options_.device.is_cuda()) {
    CudaForwardOptions cuda_options;
    cuda_options.device = options_.device;
    cuda_options.graphs = options_.cuda_graphs;
    cuda_ = make_cuda_forward(config_, weights_, inv_freq_, rope_factor_, cuda_options);
  }
}

KvCache LlamaModel::make_cache(std::int64_t max_seq) const {
  return KvCache(config_.n_layers, max_seq > 0 ? max_seq : config_.context_length, config_.n_kv_heads,
                 config_.head_dim, options_.device, cuda_ ? cuda_->cache_dtype() : DType::f32);
}

void LlamaModel::ensure_scratch(std::int64_t n) {
  if (n <= scratch_tokens_) return;
  const auto sized = [n](std::int64_t width) { return static_cast<std::size_t>(n * width); };
  x_.resize(sized(config_.dim));
  xn_.resize(sized(config_.dim));
  proj_.resize(sized(config_.dim));
  q_.resize(sized(config_.q_dim()));
  attn_.resize(sized(config_.q_dim()));
  gate_.resize(sized(config_.ffn_dim));
  up_.resize(sized(config_.ffn_dim));
  scratch_tokens_ = n;
}

void LlamaModel::attention_block(std::int64_t layer, std::int64_t n, KvCache& cache) {
  const LlamaConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
  const std::int64_t pos0 = cache.length();
  const Tensor x = cpu_view(x_.data(), {n, c.dim});
  const Tensor xn = cpu_view(xn_.data(), {n, c.dim});
  rmsnorm_forward(x, cpu_view(w.attn_norm.data(), {c.dim}), xn, c.rms_eps);

  // K and V land directly in their cache rows: no copy.
  float* k_new = cache.k_rows(layer, pos0);
  float* v_new = cache.v_rows(layer, pos0);
  linear_forward(w.wq, xn_.data(), q_.data(), n, *pool_);
  linear_forward(w.wk, xn_.data(), k_new, n, *pool_);
  linear_forward(w.wv, xn_.data(), v_new, n, *pool_);

  RopeArgs rope;
  rope.rotary_dim = c.rotary_dim;
  rope.style = rope_style(weights_.qk_order);
  rope.position_offset = pos0;
  rope.attention_factor = rope_factor_;
  const Tensor inv_freq = cpu_view(inv_freq_.data(), {static_cast<std::int64_t>(inv_freq_.size())});
  const Tensor q = cpu_view(q_.data(), {1, n, c.n_heads, c.head_dim});
  const Tensor k = cpu_view(k_new, {1, n, c.n_kv_heads, c.head_dim});
  rope_forward(q, inv_freq, q, rope);
  rope_forward(k, inv_freq, k, rope);

  const std::int64_t kv_length = pos0 + n;
  AttentionBatch batch;
  batch.q = q;
  batch.k_cache = cache.k(layer);
  batch.v_cache = cache.v(layer);
  batch.out = cpu_view(attn_.data(), {1, n, c.n_heads, c.head_dim});
  batch.kv_lengths = std::span<const std::int64_t>(&kv_length, 1);
  batch.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  if (n == 1)
    attention_->decode(batch);
  else
    attention_->prefill(batch);

  linear_forward(w.wo, attn_.data(), proj_.data(), n, *pool_);
  add_into(x_.data(), proj_.data(), n * c.dim);
}

void LlamaModel::ffn_block(std::int64_t layer, std::int64_t n) {
  const LlamaConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
  rmsnorm_forward(cpu_view(x_.data(), {n, c.dim}), cpu_view(w.ffn_norm.data(), {c.dim}),
                  cpu_view(xn_.data(), {n, c.dim}), c.rms_eps);
  linear_forward(w.w_gate, xn_.data(), gate_.data(), n, *pool_);
  linear_forward(w.w_up, xn_.data(), up_.data(), n, *pool_);
  const Tensor gate = cpu_view(gate_.data(), {n, c.ffn_dim});
  swiglu_forward(gate, cpu_view(up_.data(), {n, c.ffn_dim}), gate);
  linear_forward(w.w_down, gate_.data(), proj_.data(), n, *pool_);
  add_into(x_.data(), proj_.data(), n * c.dim);
}

void LlamaModel::check_forward_args(std::span<const std::int32_t> tokens, const KvCache& cache) const {
  constexpr const char* where = "LlamaModel::forward";
  const LlamaConfig& c = config_;
  const auto n = static_cast<std::int64_t>(tokens.size());
  check_forward_inputs(where, tokens, cache, c.n_layers, c.n_kv_heads, c.head_dim, c.vocab_size, options_.device);
  cache.check_room(n);
}

std::span<const float> LlamaModel::forward_on_cpu(std::span<const std::int32_t> tokens, KvCache& cache,
                                                  bool all_logits) {
  const LlamaConfig& c = config_;
  const auto n = static_cast<std::int64_t>(tokens.size());
  ensure_scratch(n);

  for (std::int64_t i = 0; i < n; ++i)
    weights_.token_embd.row_to_f32(tokens[static_cast<std::size_t>(i)], x_.data() + i * c.dim);
  for (std::int64_t layer = 0; layer < c.n_layers; ++layer) {
    attention_block(layer, n, cache);
    ffn_block(layer, n);
  }
  cache.advance(n);

  const std::int64_t rows = all_logits ? n : 1;
  const float* last = x_.data() + (n - rows) * c.dim;
  rmsnorm_forward(cpu_view(last, {rows, c.dim}), cpu_view(weights_.output_norm.data(), {c.dim}),
                  cpu_view(xn_.data(), {rows, c.dim}), c.rms_eps);
  logits_.resize(static_cast<std::size_t>(rows * c.vocab_size));
  linear_forward(weights_.lm_head(), xn_.data(), logits_.data(), rows, *pool_);
  return logits_;
}

}  // namespace ignis::engine
