#include "engine/cuda_gpt2.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "ignis/error.h"

#if IGNIS_WITH_CUDA
#include "engine/cuda_forward_base.h"
#include "ignis/ops/activation.h"
#include "ignis/ops/cast.h"
#include "ignis/ops/embedding.h"
#include "ignis/ops/kv_cache.h"
#include "ignis/ops/norm.h"
#include "ignis/ops/position_embedding.h"
#include "ignis/ops/sampling.h"
#include "ignis/ops/transpose.h"
#endif

namespace ignis::engine {

#if IGNIS_WITH_CUDA

namespace {

constexpr const char* kWhere = "CudaGpt2";

struct DeviceLayer {
  Tensor ln1_w, ln1_b, ln2_w, ln2_b;  // [dim] f32
  Tensor qkv, attn_proj, fc, mlp_proj;  // [3 * dim, dim], [dim, dim], [ffn, dim], [dim, ffn]: f32 or bf16
  Tensor qkv_b, attn_proj_b, fc_b, mlp_proj_b;  // [3 * dim], [dim], [ffn], [dim] f32
};

class CudaGpt2 final : public CudaForwardBase {
 public:
  CudaGpt2(const Gpt2Config& config, const Gpt2Weights& weights, const CudaForwardOptions& options)
      : CudaForwardBase(options, cuda_linear_dtype(weights.lm_head().format(), kWhere), config.vocab_size,
                        std::max(config.dim, config.ffn_dim), kWhere),
        c_(config) {
    const WeightFormat format = weights.lm_head().format();

    for (const Gpt2LayerWeights& w : weights.layers) {
      DeviceLayer d;
      d.ln1_w = upload_f32(w.ln1_weight, device_);
      d.ln1_b = upload_f32(w.ln1_bias, device_);
      d.ln2_w = upload_f32(w.ln2_weight, device_);
      d.ln2_b = upload_f32(w.ln2_bias, device_);
      d.qkv = upload_stacked({&w.wq, &w.wk, &w.wv}, format, device_, kWhere);
      d.attn_proj = upload_stacked({&w.attn_proj}, format, device_, kWhere);
      d.fc = upload_stacked({&w.fc}, format, device_, kWhere);
      d.mlp_proj = upload_stacked({&w.mlp_proj}, format, device_, kWhere);
      std::vector<float> qkv_b = w.bq;
      qkv_b.insert(qkv_b.end(), w.bk.begin(), w.bk.end());
      qkv_b.insert(qkv_b.end(), w.bv.begin(), w.bv.end());
      d.qkv_b = upload_f32(qkv_b, device_);
      d.attn_proj_b = upload_f32(w.attn_proj_bias, device_);
      d.fc_b = upload_f32(w.fc_bias, device_);
      d.mlp_proj_b = upload_f32(w.mlp_proj_bias, device_);
      layers_.push_back(std::move(d));
    }
    wte_ = upload_embedding(weights.wte, device_);
    // A tied f32 head is the embedding table itself: no second copy.
    const bool tied_f32 = format == WeightFormat::f32 && !weights.lm_head_weight;
    lm_head_ = tied_f32 ? wte_ : upload_stacked({&weights.lm_head()}, format, device_, kWhere);
    wpe_ = upload_f32(weights.wpe.data(), {c_.n_positions, c_.dim}, device_);
    ln_f_w_ = upload_f32(weights.ln_f_weight, device_);
    ln_f_b_ = upload_f32(weights.ln_f_bias, device_);
    scale_ = c_.scale_attn_weights ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(c_.head_dim()))) : 1.0f;
    finish_setup();
  }

  DType cache_dtype() const override { return DType::f32; }

 private:
  void allocate_activations(std::int64_t n) override {
    const auto f32 = [&](std::int64_t width) { return Tensor::empty({n, width}, DType::f32, device_); };
    x_ = f32(c_.dim);
    xn_ = f32(c_.dim);
    qkv_ = f32(3 * c_.dim);
    qkv_t_ = f32(3 * c_.dim);
    attn_ = f32(c_.dim);
    ff_ = f32(c_.ffn_dim);
  }

  // y = x @ w^T + bias (+ y when accumulate).
  void linear(const Tensor& w, const Tensor* bias, const void* x, const Tensor& y, std::int64_t n, bool accumulate) {
    lt_->linear(w, x, y.data_as<float>(), n, accumulate ? 1.0f : 0.0f, stream(), bias);
  }

  void attention_block(std::int64_t layer, std::int64_t n, KvCache& cache) {
    const DeviceLayer& w = layers_[static_cast<std::size_t>(layer)];
    const std::int64_t d = c_.dim, hd = c_.head_dim();
    layernorm_forward(view(x_, {n, d}), w.ln1_w, w.ln1_b, view(xn_, {n, d}), c_.ln_eps, stream());
    linear(w.qkv, &w.qkv_b, linear_input(xn_, n, d), qkv_, n, false);
    // One token's row is q | k | v already; n rows [n, 3, d] become [3, n, d] through [3 * d, n].
    if (n > 1) {
      transpose(view(qkv_, {1, n, 3 * d}), view(qkv_t_, {1, 3 * d, n}), stream());
      transpose(view(qkv_t_, {3, d, n}), view(qkv_, {3, n, d}), stream());
    }
    const Tensor q = view(qkv_, {1, n, c_.n_heads, hd});
    const Tensor k = view(qkv_, {1, n, c_.n_heads, hd}, n * d);
    const Tensor v = view(qkv_, {1, n, c_.n_heads, hd}, 2 * n * d);

    // The layer's device length (before this call's append) places the new rows, so a replayed
    // graph appends at the current position.
    const Tensor length = cache.device_length(layer);
    std::int64_t host_length = cache.length();  // advanced by the append; the cache advances after all layers
    kv_cache_append(cache.k(layer), cache.v(layer), k, v, length, std::span<std::int64_t>(&host_length, 1), stream());

    const std::int64_t kv_length = cache.length() + n;
    AttentionBatch batch;
    batch.q = q;
    batch.k_cache = cache.k(layer);
    batch.v_cache = cache.v(layer);
    batch.out = view(attn_, {1, n, c_.n_heads, hd});
    batch.kv_lengths = std::span<const std::int64_t>(&kv_length, 1);
    batch.device_kv_lengths = length;
    batch.scale = scale_;
    if (n == 1)
      attention_->decode(batch, stream());
    else
      attention_->prefill(batch, stream());
    linear(w.attn_proj, &w.attn_proj_b, linear_input(attn_, n, d), x_, n, true);  // x += attn @ Wo^T + b
  }

  void mlp_block(std::int64_t layer, std::int64_t n) {
    const DeviceLayer& w = layers_[static_cast<std::size_t>(layer)];
    const std::int64_t d = c_.dim, f = c_.ffn_dim;
    layernorm_forward(view(x_, {n, d}), w.ln2_w, w.ln2_b, view(xn_, {n, d}), c_.ln_eps, stream());
    linear(w.fc, &w.fc_b, linear_input(xn_, n, d), ff_, n, false);
    const Tensor ff = view(ff_, {n, f});
    gelu_tanh_forward(ff, ff, stream());
    linear(w.mlp_proj, &w.mlp_proj_b, linear_input(ff_, n, f), x_, n, true);  // x += gelu @ Wproj^T + b
  }

  void launch_forward(std::int64_t n, KvCache& cache, std::int64_t logit_rows) override {
    const std::int64_t d = c_.dim;
    embedding_forward_deferred(wte_, view(ids_, {n}), view(x_, {n, d}), flag_, stream());
    // Positions start at the cache's device length: no layer has appended yet.
    position_embedding_add(view(x_, {1, n, d}), wpe_, 0, cache.device_length(0), stream());
    for (std::int64_t layer = 0; layer < c_.n_layers; ++layer) {
      attention_block(layer, n, cache);
      mlp_block(layer, n);
    }
    const Tensor last = view(x_, {logit_rows, d}, (n - logit_rows) * d);
    layernorm_forward(last, ln_f_w_, ln_f_b_, view(xn_, {logit_rows, d}), c_.ln_eps, stream());
    linear(lm_head_, nullptr, linear_input(xn_, logit_rows, d), logits_, logit_rows, false);
  }

  Gpt2Config c_;
  float scale_ = 1.0f;

  std::vector<DeviceLayer> layers_;
  Tensor wte_;              // [vocab, dim] f32
  Tensor lm_head_;          // [vocab, dim], the linear layers' dtype (wte_ itself when tied and f32)
  Tensor wpe_;              // [n_positions, dim] f32
  Tensor ln_f_w_, ln_f_b_;  // [dim] f32

  // Activations for the most tokens a pass has had so far, [tokens, width] f32; qkv_t_ is c_attn's
  // output transposed on its way to q | k | v blocks.
  Tensor x_, xn_, qkv_, qkv_t_, attn_, ff_;
};

}  // namespace

std::unique_ptr<CudaForward> make_cuda_gpt2(const Gpt2Config& config, const Gpt2Weights& weights,
                                            const CudaForwardOptions& options) {
  return std::make_unique<CudaGpt2>(config, weights, options);
}

#else

std::unique_ptr<CudaForward> make_cuda_gpt2(const Gpt2Config&, const Gpt2Weights&, const CudaForwardOptions& options) {
  fail_expected("Gpt2Model", "device", "cpu (ignis was built without CUDA)", options.device);
}

#endif

}  // namespace ignis::engine
