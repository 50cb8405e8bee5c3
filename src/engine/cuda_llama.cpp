#include "engine/cuda_llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "ignis/error.h"

#if IGNIS_WITH_CUDA
#include "engine/cuda_forward_base.h"
#include "ignis/ops/activation.h"
#include "ignis/ops/attention_decode.h"
#include "ignis/ops/cast.h"
#include "ignis/ops/embedding.h"
#include "ignis/ops/flash_attention.h"
#include "ignis/ops/fused_linear.h"
#include "ignis/ops/norm.h"
#include "ignis/ops/rope.h"
#include "ignis/ops/rope_append.h"
#endif

namespace ignis::engine {

#if IGNIS_WITH_CUDA

namespace {

constexpr const char* kWhere = "CudaForward";
// Up to this many tokens a pass runs the fused matrix-vector ops (weights read once for all
// rows); longer prompts go through cuBLASLt GEMMs.
constexpr std::int64_t kFusedRows = 8;

struct DeviceLayer {
  Tensor attn_norm, ffn_norm;           // [dim] f32
  Tensor wqkv;                          // [q_dim + 2 * kv_dim, dim]: q, k, v stacked
  Tensor wo, w_gate, w_up, w_down;      // [out, in]; all of one dtype, f32 or bf16
};

class CudaLlama final : public CudaForwardBase {
 public:
  CudaLlama(const LlamaConfig& config, const LlamaWeights& weights, const std::vector<float>& inv_freq,
            float rope_factor, const CudaForwardOptions& options)
      : CudaForwardBase(options, cuda_linear_dtype(weights.lm_head().format(), kWhere), config.vocab_size,
                        std::max({config.dim, config.q_dim(), config.ffn_dim}), kWhere),
        c_(config),
        style_(rope_style(weights.qk_order)),
        rope_factor_(rope_factor) {
    const WeightFormat format = weights.lm_head().format();
    // A bf16 cache only where the fused attention kernels take its head_dim; otherwise the f32
    // kernels (any head_dim) read an f32 cache.
    const bool fast_attention = flash_attention_head_dim_supported(c_.head_dim) &&
                                attention_decode_head_dim_supported(c_.head_dim);
    cache_dtype_ = linear_dtype_ == DType::bf16 && fast_attention ? DType::bf16 : DType::f32;

    for (const LlamaLayerWeights& w : weights.layers) {
      DeviceLayer d;
      d.attn_norm = upload_f32(w.attn_norm.data(), {c_.dim}, device_);
      d.ffn_norm = upload_f32(w.ffn_norm.data(), {c_.dim}, device_);
      d.wqkv = upload_stacked({&w.wq, &w.wk, &w.wv}, format, device_, kWhere);
      d.wo = upload_stacked({&w.wo}, format, device_, kWhere);
      d.w_gate = upload_stacked({&w.w_gate}, format, device_, kWhere);
      d.w_up = upload_stacked({&w.w_up}, format, device_, kWhere);
      d.w_down = upload_stacked({&w.w_down}, format, device_, kWhere);
      layers_.push_back(std::move(d));
    }
    embd_ = upload_embedding(weights.token_embd, device_);
    lm_head_ = upload_stacked({&weights.lm_head()}, format, device_, kWhere);
    out_norm_ = upload_f32(weights.output_norm.data(), {c_.dim}, device_);
    inv_freq_ = upload_f32(inv_freq, device_);
    finish_setup();
  }

  DType cache_dtype() const override { return cache_dtype_; }

 private:
  void allocate_activations(std::int64_t n) override {
    const auto f32 = [&](std::int64_t width) { return Tensor::empty({n, width}, DType::f32, device_); };
    x_ = f32(c_.dim);
    xn_ = f32(c_.dim);
    qkv_ = f32(c_.q_dim() + 2 * c_.kv_dim());
    q_ = Tensor::empty({n, c_.q_dim()}, cache_dtype_, device_);
    attn_ = Tensor::empty({n, c_.q_dim()}, cache_dtype_, device_);
    gate_ = f32(c_.ffn_dim);
    up_ = f32(c_.ffn_dim);
    hidden_ = Tensor::empty({n, c_.ffn_dim}, linear_dtype_, device_);
  }

  void linear(const Tensor& w, const void* x, const Tensor& y, std::int64_t n, float beta) {
    lt_->linear(w, x, y.data_as<float>(), n, beta, stream());
  }

  // n new tokens: rmsnorm, q|k|v projection (fused with the norm for a decode step), then RoPE
  // and the cache append in one launch, which also advances the layer's device length.
  void qkv_block(const DeviceLayer& w, std::int64_t layer, std::int64_t n, KvCache& cache) {
    const Tensor qkv = view(qkv_, {n, c_.q_dim() + 2 * c_.kv_dim()});
    if (n <= kFusedRows) {
      rmsnorm_matvec(view(x_, {n, c_.dim}), w.attn_norm, w.wqkv, qkv, c_.rms_eps, overlapped());
    } else {
      rmsnorm_forward(view(x_, {n, c_.dim}), w.attn_norm, view(xn_, {n, c_.dim}), c_.rms_eps, stream());
      linear(w.wqkv, linear_input(xn_, n, c_.dim), qkv_, n, 0.0f);
    }
    // Positions come from the layer's device length (before this call's append), so a replayed
    // graph rotates at the current position.
    RopeAppendArgs rope;
    rope.rotary_dim = c_.rotary_dim;
    rope.style = style_;
    rope.attention_factor = rope_factor_;
    std::int64_t host_length = cache.length();  // advanced by the append; the cache advances after all layers
    rope_qkv_append(qkv, inv_freq_, rope, view(q_, {n, c_.n_heads, c_.head_dim}), cache.k(layer), cache.v(layer),
                    cache.device_length(layer), std::span<std::int64_t>(&host_length, 1), overlapped());
  }

  void attention_block(std::int64_t layer, std::int64_t n, KvCache& cache) {
    const DeviceLayer& w = layers_[static_cast<std::size_t>(layer)];
    qkv_block(w, layer, n, cache);
    const std::int64_t kv_length = cache.length() + n;
    AttentionBatch batch;
    batch.q = view(q_, {1, n, c_.n_heads, c_.head_dim});
    batch.k_cache = cache.k(layer);
    batch.v_cache = cache.v(layer);
    batch.out = view(attn_, {1, n, c_.n_heads, c_.head_dim});
    batch.kv_lengths = std::span<const std::int64_t>(&kv_length, 1);
    batch.device_kv_lengths = cache.device_length(layer);
    batch.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c_.head_dim)));
    if (n == 1)
      attention_->decode(batch, overlapped());
    else
      attention_->prefill(batch, stream());
    // x += attn @ Wo^T; the attention output is in the cache's dtype, usually the linear layers'.
    if (n <= kFusedRows)
      matvec_add(view(attn_, {n, c_.q_dim()}), w.wo, view(x_, {n, c_.dim}), overlapped());
    else
      linear(w.wo, cache_dtype_ == linear_dtype_ ? attn_.data() : linear_input(attn_, n, c_.q_dim()), x_, n, 1.0f);
  }

  void ffn_block(std::int64_t layer, std::int64_t n) {
    const DeviceLayer& w = layers_[static_cast<std::size_t>(layer)];
    const Tensor hidden = view(hidden_, {n, c_.ffn_dim});
    if (n <= kFusedRows) {
      rmsnorm_swiglu_matvec(view(x_, {n, c_.dim}), w.ffn_norm, w.w_gate, w.w_up, hidden, c_.rms_eps, overlapped());
      matvec_add(hidden, w.w_down, view(x_, {n, c_.dim}), overlapped());  // x += swiglu @ Wdown^T
      return;
    }
    rmsnorm_forward(view(x_, {n, c_.dim}), w.ffn_norm, view(xn_, {n, c_.dim}), c_.rms_eps, stream());
    const void* in = linear_input(xn_, n, c_.dim);
    linear(w.w_gate, in, gate_, n, 0.0f);
    linear(w.w_up, in, up_, n, 0.0f);
    const Tensor gate = view(gate_, {n, c_.ffn_dim});
    swiglu_forward(gate, view(up_, {n, c_.ffn_dim}), gate, stream());
    linear(w.w_down, linear_input(gate_, n, c_.ffn_dim), x_, n, 1.0f);  // x += swiglu @ Wdown^T
  }

  void launch_forward(std::int64_t n, KvCache& cache, std::int64_t logit_rows) override {
    embedding_forward_deferred(embd_, view(ids_, {n}), view(x_, {n, c_.dim}), flag_, stream());
    for (std::int64_t layer = 0; layer < c_.n_layers; ++layer) {
      attention_block(layer, n, cache);
      ffn_block(layer, n);
    }
    const Tensor last = Tensor::view(x_.data_as<float>() + (n - logit_rows) * c_.dim, DType::f32, device_,
                                     {logit_rows, c_.dim});
    if (logit_rows <= kFusedRows) {
      rmsnorm_matvec(last, out_norm_, lm_head_, view(logits_, {logit_rows, c_.vocab_size}), c_.rms_eps,
                     overlapped());
      return;
    }
    rmsnorm_forward(last, out_norm_, view(xn_, {logit_rows, c_.dim}), c_.rms_eps, stream());
    linear(lm_head_, linear_input(xn_, logit_rows, c_.dim), logits_, logit_rows, 0.0f);
  }

  LlamaConfig c_;
  RopeStyle style_;
  float rope_factor_;
  DType cache_dtype_ = DType::f32;  // of the KV cache, the rotated queries and the attention output

  std::vector<DeviceLayer> layers_;
  Tensor embd_;      // [vocab, dim] f32
  Tensor lm_head_;   // [vocab, dim], the linear layers' dtype
  Tensor out_norm_;  // [dim] f32
  Tensor inv_freq_;  // [rotary_dim / 2] f32

  // Activations for the most tokens a pass has had so far: [tokens, width] f32, and q_, attn_
  // (the cache's dtype) and hidden_ (the linear layers' dtype).
  Tensor x_, xn_, qkv_, gate_, up_;
  Tensor q_, attn_, hidden_;
};

}  // namespace

std::unique_ptr<CudaForward> make_cuda_forward(const LlamaConfig& config, const LlamaWeights& weights,
                                               const std::vector<float>& inv_freq, float rope_factor,
                                               const CudaForwardOptions& options) {
  return std::make_unique<CudaLlama>(config, weights, inv_freq, rope_factor, options);
}

#else

std::unique_ptr<CudaForward> make_cuda_forward(const LlamaConfig&, const LlamaWeights&, const std::vector<float>&,
                                               float, const CudaForwardOptions& options) {
  fail_expected("LlamaModel", "device", "cpu (ignis was built without CUDA)", options.device);
}

#endif

}  // namespace ignis::engine
