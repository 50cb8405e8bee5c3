#include "engine/cuda_llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "ignis/error.h"

#if IGNIS_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "engine/cuda_attention.h"
#include "engine/cuda_graph_step.h"
#include "engine/cuda_linear.h"
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

Tensor upload_f32(const float* data, Shape shape, Device device) {
  return Tensor::view(const_cast<float*>(data), DType::f32, Device::cpu(), std::move(shape)).to(device);
}

// The weights stacked by rows into one [sum of rows, cols] matrix on the device (one weight
// alone is the plain upload): q, k and v become one projection, read by one launch.
Tensor upload_linear(std::initializer_list<const LinearWeight*> parts, Device device) {
  const LinearWeight& first = **parts.begin();
  const WeightFormat format = first.format();
  check_arg(format == WeightFormat::f32 || format == WeightFormat::bf16, kWhere, "weights.format",
            "f32 or bf16 on CUDA", weight_format_name(format));
  std::int64_t rows = 0;
  for (const LinearWeight* w : parts) {
    check_arg(w->format() == format && w->cols() == first.cols(), kWhere, "stacked weights",
              "one format and width", weight_format_name(w->format()));
    rows += w->rows();
  }
  const std::size_t width = static_cast<std::size_t>(first.cols());
  if (format == WeightFormat::f32) {
    std::vector<float> host;
    host.reserve(static_cast<std::size_t>(rows) * width);
    for (const LinearWeight* w : parts) host.insert(host.end(), w->f32_data(), w->f32_data() + w->rows() * width);
    return upload_f32(host.data(), {rows, first.cols()}, device);
  }
  std::vector<std::uint16_t> host;
  host.reserve(static_cast<std::size_t>(rows) * width);
  for (const LinearWeight* w : parts) host.insert(host.end(), w->bf16_data(), w->bf16_data() + w->rows() * width);
  return Tensor::view(host.data(), DType::bf16, Device::cpu(), {rows, first.cols()}).to(device);
}

Tensor upload_linear(const LinearWeight& w, Device device) { return upload_linear({&w}, device); }

// The whole table widened to f32: a lookup reads one row per token, so its width costs nothing.
Tensor upload_embedding(const LinearWeight& w, Device device) {
  std::vector<float> table(static_cast<std::size_t>(w.rows() * w.cols()));
  for (std::int64_t r = 0; r < w.rows(); ++r) w.row_to_f32(r, table.data() + r * w.cols());
  return upload_f32(table.data(), {w.rows(), w.cols()}, device);
}

struct DeviceLayer {
  Tensor attn_norm, ffn_norm;           // [dim] f32
  Tensor wqkv;                          // [q_dim + 2 * kv_dim, dim]: q, k, v stacked
  Tensor wo, w_gate, w_up, w_down;      // [out, in]; all of one dtype, f32 or bf16
};

class CudaLlama final : public CudaForward {
 public:
  CudaLlama(const LlamaConfig& config, const LlamaWeights& weights, const std::vector<float>& inv_freq,
            float rope_factor, const CudaForwardOptions& options)
      : c_(config),
        device_(options.device),
        step_(options.graphs),
        style_(rope_style(weights.qk_order)),
        rope_factor_(rope_factor) {
    check_arg(device_.is_cuda(), kWhere, "device", "cuda", device_);
    IGNIS_CUDA_CHECK(cudaSetDevice(device_.index));
    const WeightFormat format = weights.lm_head().format();
    check_arg(format == WeightFormat::f32 || format == WeightFormat::bf16, kWhere, "weights.format",
              "f32 or bf16 on CUDA", weight_format_name(format));
    linear_dtype_ = format == WeightFormat::bf16 ? DType::bf16 : DType::f32;
    // A bf16 cache only where the fused attention kernels take its head_dim; otherwise the f32
    // kernels (any head_dim) read an f32 cache.
    const bool fast_attention = flash_attention_head_dim_supported(c_.head_dim) &&
                                attention_decode_head_dim_supported(c_.head_dim);
    cache_dtype_ = linear_dtype_ == DType::bf16 && fast_attention ? DType::bf16 : DType::f32;
    IGNIS_CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking: synchronous copies on the default stream wait for it
    IGNIS_CUDA_CHECK(cudaMallocHost(&pinned_id_, sizeof(std::int32_t)));
    lt_ = std::make_unique<CublasLt>(device_);
    attention_ = make_cuda_attention();

    for (const LlamaLayerWeights& w : weights.layers) {
      DeviceLayer d;
      d.attn_norm = upload_f32(w.attn_norm.data(), {c_.dim}, device_);
      d.ffn_norm = upload_f32(w.ffn_norm.data(), {c_.dim}, device_);
      d.wqkv = upload_linear({&w.wq, &w.wk, &w.wv}, device_);
      d.wo = upload_linear(w.wo, device_);
      d.w_gate = upload_linear(w.w_gate, device_);
      d.w_up = upload_linear(w.w_up, device_);
      d.w_down = upload_linear(w.w_down, device_);
      for (const Tensor* t : {&d.wqkv, &d.wo, &d.w_gate, &d.w_up, &d.w_down})
        check_dtype(*t, linear_dtype_, kWhere, "layer weights (one format for every linear layer)");
      layers_.push_back(std::move(d));
    }
    embd_ = upload_embedding(weights.token_embd, device_);
    lm_head_ = upload_linear(weights.lm_head(), device_);
    out_norm_ = upload_f32(weights.output_norm.data(), {c_.dim}, device_);
    inv_freq_ = upload_f32(inv_freq.data(), {static_cast<std::int64_t>(inv_freq.size())}, device_);
    flag_ = Tensor::empty({3}, DType::i64, device_);
    embedding_clear_flag(flag_, stream());
    ensure_buffers(1, 1);
    IGNIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  ~CudaLlama() override {
    // Destructors must not throw: failures here leak at worst.
    cudaStreamSynchronize(stream_);
    step_.drop();
    if (pinned_id_) cudaFreeHost(pinned_id_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const AttentionBackend& attention() const override { return *attention_; }
  DType cache_dtype() const override { return cache_dtype_; }
  std::int64_t graph_replays() const override { return step_.replays(); }

  std::span<const float> forward(std::span<const std::int32_t> tokens, KvCache& cache, bool all_logits) override {
    const auto n = static_cast<std::int64_t>(tokens.size());
    const std::int64_t rows = all_logits ? n : 1;
    run(tokens, cache, rows);
    host_logits_.resize(static_cast<std::size_t>(rows * c_.vocab_size));
    IGNIS_CUDA_CHECK(cudaMemcpyAsync(host_logits_.data(), logits_.data(), host_logits_.size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream_));
    IGNIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return host_logits_;
  }

  std::int32_t forward_sample(std::span<const std::int32_t> tokens, KvCache& cache,
                              const SamplingParams& params) override {
    run(tokens, cache, 1);
    // The id lands where the next step's embedding reads its token.
    sample(view(logits_, {1, c_.vocab_size}), params, view(ids_, {1}), stream());
    IGNIS_CUDA_CHECK(cudaMemcpyAsync(pinned_id_, ids_.data(), sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream_));
    IGNIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    device_token_ = *pinned_id_;
    return device_token_;
  }

 private:
  Stream stream() const { return Stream{stream_}; }
  // For the fused decode ops: their weights never change, so each may start (and pull its weights
  // into L2) while the kernel before it finishes.
  Stream overlapped() const { return Stream{stream_, true}; }

  Tensor view(const Tensor& buffer, Shape shape) const {
    return Tensor::view(buffer.data(), buffer.dtype(), device_, std::move(shape));
  }

  // Every activation buffer for n tokens and `logit_rows` rows of logits, allocated outside any
  // graph capture. Reallocating moves buffers a captured graph points at, so it drops the graph.
  void ensure_buffers(std::int64_t n, std::int64_t logit_rows) {
    if (n > tokens_cap_) {
      step_.drop();
      tokens_cap_ = n;
      const auto f32 = [&](std::int64_t width) { return Tensor::empty({n, width}, DType::f32, device_); };
      ids_ = Tensor::empty({n}, DType::i32, device_);
      device_token_ = -1;
      x_ = f32(c_.dim);
      xn_ = f32(c_.dim);
      qkv_ = f32(c_.q_dim() + 2 * c_.kv_dim());
      q_ = Tensor::empty({n, c_.q_dim()}, cache_dtype_, device_);
      attn_ = Tensor::empty({n, c_.q_dim()}, cache_dtype_, device_);
      gate_ = f32(c_.ffn_dim);
      up_ = f32(c_.ffn_dim);
      hidden_ = Tensor::empty({n, c_.ffn_dim}, linear_dtype_, device_);
      if (linear_dtype_ == DType::bf16)
        linear_in_ = Tensor::empty({n, std::max({c_.dim, c_.q_dim(), c_.ffn_dim})}, DType::bf16, device_);
    }
    if (logit_rows > logit_rows_cap_) {
      step_.drop();
      logit_rows_cap_ = logit_rows;
      logits_ = Tensor::empty({logit_rows, c_.vocab_size}, DType::f32, device_);
    }
  }

  // The input of a linear layer: the f32 activations themselves, or their bf16 copy for bf16 weights.
  const void* linear_input(const Tensor& buffer, std::int64_t n, std::int64_t width) {
    if (linear_dtype_ == DType::f32) return buffer.data();
    cast(view(buffer, {n, width}), view(linear_in_, {n, width}), stream());
    return linear_in_.data();
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

  // Every launch of one forward pass, on the model's stream, with no host synchronization and
  // no allocation: ids_ holds the n tokens; logits_ receives the last logit_rows rows.
  void launch_forward(std::int64_t n, KvCache& cache, std::int64_t logit_rows) {
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

  void run(std::span<const std::int32_t> tokens, KvCache& cache, std::int64_t logit_rows) {
    const auto n = static_cast<std::int64_t>(tokens.size());
    check_device(cache.k(0), device_, kWhere, "cache");
    ensure_buffers(n, logit_rows);
    // After a sampled step the device already holds the next token: no copy.
    if (!(n == 1 && tokens[0] == device_token_))
      IGNIS_CUDA_CHECK(cudaMemcpyAsync(ids_.data(), tokens.data(), tokens.size_bytes(), cudaMemcpyHostToDevice, stream_));
    device_token_ = tokens[0];
    if (n == 1 && step_.active())
      step_.run(cache, stream(), [&] { launch_forward(1, cache, 1); });
    else
      launch_forward(n, cache, logit_rows);
  }

  LlamaConfig c_;
  Device device_;
  CudaGraphStep step_;
  RopeStyle style_;
  float rope_factor_;
  DType linear_dtype_ = DType::f32;
  DType cache_dtype_ = DType::f32;  // of the KV cache, the rotated queries and the attention output
  cudaStream_t stream_ = nullptr;
  std::int32_t* pinned_id_ = nullptr;
  std::unique_ptr<CublasLt> lt_;
  std::unique_ptr<AttentionBackend> attention_;

  std::vector<DeviceLayer> layers_;
  Tensor embd_;      // [vocab, dim] f32
  Tensor lm_head_;   // [vocab, dim], the linear layers' dtype
  Tensor out_norm_;  // [dim] f32
  Tensor inv_freq_;  // [rotary_dim / 2] f32
  Tensor flag_;      // [3] i64: embedding's bad-id record (ids are checked on the host first)

  // Activations, [tokens_cap_, width] f32; linear_in_ is the bf16 copy of a linear layer's input.
  std::int64_t tokens_cap_ = 0, logit_rows_cap_ = 0;
  Tensor ids_, x_, xn_, qkv_, gate_, up_, linear_in_, logits_;
  Tensor q_, attn_, hidden_;  // [tokens_cap_, width] in the linear layers' dtype
  std::vector<float> host_logits_;
  std::int32_t device_token_ = -1;  // ids_[0] as last written (-1: unknown)
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
