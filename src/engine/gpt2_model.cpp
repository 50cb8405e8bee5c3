#include "engine/gpt2_model.h"

#include <cmath>
#include <filesystem>
#include <string>

#include "engine/cuda_gpt2.h"
#include "engine/cpu_forward.h"
#include "ignis/error.h"
#include "ignis/ops/activation.h"
#include "ignis/ops/norm.h"

namespace ignis::engine {

Gpt2Files Gpt2Files::locate(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  fs::path dir, weights;
  if (fs::is_directory(p)) {
    dir = p;
    weights = p / "model.safetensors";
  } else if (p.extension() == ".safetensors") {
    dir = p.parent_path();
    weights = p;
  } else {
    fail_expected("gpt2", "model path", "a folder with config.json and model.safetensors, or a .safetensors file",
                  path);
  }
  return {(dir / "config.json").string(), weights.string(), (dir / "tokenizer.json").string()};
}

std::unique_ptr<Gpt2Model> Gpt2Model::load(const std::string& path, const ModelOptions& options) {
  check_device_format(options, "Gpt2Model");
  const Gpt2Files files = Gpt2Files::locate(path);
  Gpt2Config config = Gpt2Config::from_file(files.config);
  const model::SafetensorsFile file = model::SafetensorsFile::open(files.weights);
  Gpt2Weights weights = Gpt2Weights::load(file, config, options.weights.format);
  return std::make_unique<Gpt2Model>(std::move(config), std::move(weights), options);
}

Gpt2Model::Gpt2Model(Gpt2Config config, Gpt2Weights weights, const ModelOptions& options)
    : DecoderModel(options, "Gpt2Model"), config_(std::move(config)), weights_(std::move(weights)) {
  config_.validate();
  check_arg(static_cast<std::int64_t>(weights_.layers.size()) == config_.n_layers, "Gpt2Model", "weights.layers",
            config_.n_layers, weights_.layers.size());
  if (options_.device.is_cuda()) {
    CudaForwardOptions cuda_options;
    cuda_options.device = options_.device;
    cuda_options.graphs = options_.cuda_graphs;
    cuda_ = make_cuda_gpt2(config_, weights_, cuda_options);
  }
}

KvCache Gpt2Model::make_cache(std::int64_t max_seq) const {
  check_arg(max_seq <= config_.n_positions, "Gpt2Model::make_cache", "max_seq",
            "<= n_positions " + std::to_string(config_.n_positions) + " (learned positions)", max_seq);
  return KvCache(config_.n_layers, max_seq > 0 ? max_seq : config_.n_positions, config_.n_heads,
                 config_.head_dim(), options_.device);
}

void Gpt2Model::ensure_scratch(std::int64_t n) {
  if (n <= scratch_tokens_) return;
  const auto sized = [n](std::int64_t width) { return static_cast<std::size_t>(n * width); };
  for (std::vector<float>* v : {&x_, &xn_, &q_, &attn_, &proj_}) v->resize(sized(config_.dim));
  ff_.resize(sized(config_.ffn_dim));
  scratch_tokens_ = n;
}

void Gpt2Model::attention_block(std::int64_t layer, std::int64_t n, KvCache& cache) {
  const Gpt2Config& c = config_;
  const Gpt2LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
  const std::int64_t pos0 = cache.length(), d = c.dim;
  layernorm_forward(cpu_view(x_.data(), {n, d}), cpu_view(w.ln1_weight.data(), {d}),
                    cpu_view(w.ln1_bias.data(), {d}), cpu_view(xn_.data(), {n, d}), c.ln_eps);

  // K and V land directly in their cache rows: no copy.
  float* k_new = cache.k_rows(layer, pos0);
  float* v_new = cache.v_rows(layer, pos0);
  linear_forward(w.wq, xn_.data(), q_.data(), n, *pool_);
  linear_forward(w.wk, xn_.data(), k_new, n, *pool_);
  linear_forward(w.wv, xn_.data(), v_new, n, *pool_);
  add_bias(q_.data(), w.bq.data(), n, d);
  add_bias(k_new, w.bk.data(), n, d);
  add_bias(v_new, w.bv.data(), n, d);

  const std::int64_t kv_length = pos0 + n, hd = c.head_dim();
  AttentionBatch batch;
  batch.q = cpu_view(q_.data(), {1, n, c.n_heads, hd});
  batch.k_cache = cache.k(layer);
  batch.v_cache = cache.v(layer);
  batch.out = cpu_view(attn_.data(), {1, n, c.n_heads, hd});
  batch.kv_lengths = std::span<const std::int64_t>(&kv_length, 1);
  batch.scale = c.scale_attn_weights ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))) : 1.0f;
  if (n == 1)
    attention_->decode(batch);
  else
    attention_->prefill(batch);

  linear_forward(w.attn_proj, attn_.data(), proj_.data(), n, *pool_);
  add_bias(proj_.data(), w.attn_proj_bias.data(), n, d);
  add_into(x_.data(), proj_.data(), n * d);
}

void Gpt2Model::mlp_block(std::int64_t layer, std::int64_t n) {
  const Gpt2Config& c = config_;
  const Gpt2LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
  const std::int64_t d = c.dim, f = c.ffn_dim;
  layernorm_forward(cpu_view(x_.data(), {n, d}), cpu_view(w.ln2_weight.data(), {d}),
                    cpu_view(w.ln2_bias.data(), {d}), cpu_view(xn_.data(), {n, d}), c.ln_eps);
  linear_forward(w.fc, xn_.data(), ff_.data(), n, *pool_);
  add_bias(ff_.data(), w.fc_bias.data(), n, f);
  const Tensor ff = cpu_view(ff_.data(), {n, f});
  gelu_tanh_forward(ff, ff);
  linear_forward(w.mlp_proj, ff_.data(), proj_.data(), n, *pool_);
  add_bias(proj_.data(), w.mlp_proj_bias.data(), n, d);
  add_into(x_.data(), proj_.data(), n * d);
}

void Gpt2Model::check_forward_args(std::span<const std::int32_t> tokens, const KvCache& cache) const {
  const Gpt2Config& c = config_;
  const auto n = static_cast<std::int64_t>(tokens.size());
  check_forward_inputs("Gpt2Model::forward", tokens, cache, c.n_layers, c.n_heads, c.head_dim(), c.vocab_size,
                       options_.device);
  const std::int64_t pos0 = cache.length();
  if (pos0 + n > c.n_positions)
    throw Error("context length exceeded: " + std::to_string(pos0) + " + " + std::to_string(n) + " > " +
                std::to_string(c.n_positions) + " (GPT-2's learned positions)");
  cache.check_room(n);
}

std::span<const float> Gpt2Model::forward_on_cpu(std::span<const std::int32_t> tokens, KvCache& cache,
                                                 bool all_logits) {
  const Gpt2Config& c = config_;
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t d = c.dim;
  const std::int64_t pos0 = cache.length();
  ensure_scratch(n);

  for (std::int64_t i = 0; i < n; ++i) {
    float* row = x_.data() + i * d;
    weights_.wte.row_to_f32(tokens[static_cast<std::size_t>(i)], row);
    add_into(row, weights_.wpe.data() + (pos0 + i) * d, d);
  }
  for (std::int64_t layer = 0; layer < c.n_layers; ++layer) {
    attention_block(layer, n, cache);
    mlp_block(layer, n);
  }
  cache.advance(n);

  const std::int64_t rows = all_logits ? n : 1;
  layernorm_forward(cpu_view(x_.data() + (n - rows) * d, {rows, d}), cpu_view(weights_.ln_f_weight.data(), {d}),
                    cpu_view(weights_.ln_f_bias.data(), {d}), cpu_view(xn_.data(), {rows, d}), c.ln_eps);
  logits_.resize(static_cast<std::size_t>(rows * c.vocab_size));
  linear_forward(weights_.lm_head(), xn_.data(), logits_.data(), rows, *pool_);
  return logits_;
}

}  // namespace ignis::engine
