#include "engine/cuda_gpt2.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "ignis/error.h"

#if IGNIS_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "engine/cuda_attention.h"
#include "engine/cuda_graph_step.h"
#include "engine/cuda_linear.h"
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

Tensor upload_f32(const float* data, Shape shape, Device device) {
  return Tensor::view(const_cast<float*>(data), DType::f32, Device::cpu(), std::move(shape)).to(device);
}

Tensor upload_f32(const std::vector<float>& v, Device device) {
  return upload_f32(v.data(), {static_cast<std::int64_t>(v.size())}, device);
}

// The rows of several linear layers of one width stacked into one [sum of rows, cols] matrix,
// in their format (f32 or bf16).
Tensor upload_stacked(std::initializer_list<const LinearWeight*> parts, WeightFormat format, Device device) {
  const std::int64_t cols = (*parts.begin())->cols();
  std::int64_t rows = 0;
  for (const LinearWeight* w : parts) {
    check_arg(w->format() == format, kWhere, "weights.format (one format for every linear layer)",
              weight_format_name(format), weight_format_name(w->format()));
    check_arg(w->cols() == cols, kWhere, "stacked weights' cols", cols, w->cols());
    rows += w->rows();
  }
  const auto take = [&](auto values, auto data_of, DType dtype) {
    for (const LinearWeight* w : parts) {
      const auto* first = data_of(*w);
      values.insert(values.end(), first, first + w->rows() * cols);
    }
    return Tensor::view(values.data(), dtype, Device::cpu(), {rows, cols}).to(device);
  };
  if (format == WeightFormat::f32)
    return take(std::vector<float>(), [](const LinearWeight& w) { return w.f32_data(); }, DType::f32);
  return take(std::vector<std::uint16_t>(), [](const LinearWeight& w) { return w.bf16_data(); }, DType::bf16);
}

// The whole table widened to f32: a lookup reads one row per token, so its width costs nothing.
Tensor upload_embedding(const LinearWeight& w, Device device) {
  std::vector<float> table(static_cast<std::size_t>(w.rows() * w.cols()));
  for (std::int64_t r = 0; r < w.rows(); ++r) w.row_to_f32(r, table.data() + r * w.cols());
  return upload_f32(table.data(), {w.rows(), w.cols()}, device);
}

struct DeviceLayer {
  Tensor ln1_w, ln1_b, ln2_w, ln2_b;  // [dim] f32
  Tensor qkv, attn_proj, fc, mlp_proj;  // [3 * dim, dim], [dim, dim], [ffn, dim], [dim, ffn]: f32 or bf16
  Tensor qkv_b, attn_proj_b, fc_b, mlp_proj_b;  // [3 * dim], [dim], [ffn], [dim] f32
};

class CudaGpt2 final : public CudaForward {
 public:
  CudaGpt2(const Gpt2Config& config, const Gpt2Weights& weights, const CudaForwardOptions& options)
      : c_(config), device_(options.device), step_(options.graphs) {
    check_arg(device_.is_cuda(), kWhere, "device", "cuda", device_);
    IGNIS_CUDA_CHECK(cudaSetDevice(device_.index));
    const WeightFormat format = weights.lm_head().format();
    check_arg(format == WeightFormat::f32 || format == WeightFormat::bf16, kWhere, "weights.format",
              "f32 or bf16 on CUDA", weight_format_name(format));
    linear_dtype_ = format == WeightFormat::bf16 ? DType::bf16 : DType::f32;
    IGNIS_CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking: synchronous copies on the default stream wait for it
    IGNIS_CUDA_CHECK(cudaMallocHost(&pinned_id_, sizeof(std::int32_t)));
    lt_ = std::make_unique<CublasLt>(device_);
    attention_ = make_cuda_attention();

    for (const Gpt2LayerWeights& w : weights.layers) {
      DeviceLayer d;
      d.ln1_w = upload_f32(w.ln1_weight, device_);
      d.ln1_b = upload_f32(w.ln1_bias, device_);
      d.ln2_w = upload_f32(w.ln2_weight, device_);
      d.ln2_b = upload_f32(w.ln2_bias, device_);
      d.qkv = upload_stacked({&w.wq, &w.wk, &w.wv}, format, device_);
      d.attn_proj = upload_stacked({&w.attn_proj}, format, device_);
      d.fc = upload_stacked({&w.fc}, format, device_);
      d.mlp_proj = upload_stacked({&w.mlp_proj}, format, device_);
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
    lm_head_ = (format == WeightFormat::f32 && !weights.lm_head_weight) ? wte_
                                                                         : upload_stacked({&weights.lm_head()}, format, device_);
    wpe_ = upload_f32(weights.wpe.data(), {c_.n_positions, c_.dim}, device_);
    ln_f_w_ = upload_f32(weights.ln_f_weight, device_);
    ln_f_b_ = upload_f32(weights.ln_f_bias, device_);
    scale_ = c_.scale_attn_weights ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(c_.head_dim()))) : 1.0f;
    flag_ = Tensor::empty({3}, DType::i64, device_);
    embedding_clear_flag(flag_, stream());
    ensure_buffers(1, 1);
    IGNIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  ~CudaGpt2() override {
    // Destructors must not throw: failures here leak at worst.
    cudaStreamSynchronize(stream_);
    step_.drop();
    if (pinned_id_) cudaFreeHost(pinned_id_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const AttentionBackend& attention() const override { return *attention_; }
  DType cache_dtype() const override { return DType::f32; }
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

  // `shape` over a buffer, from its element `offset` on.
  Tensor view(const Tensor& buffer, Shape shape, std::int64_t offset = 0) const {
    char* first = buffer.data_as<char>() + offset * static_cast<std::int64_t>(dtype_size(buffer.dtype()));
    return Tensor::view(first, buffer.dtype(), device_, std::move(shape));
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
      qkv_ = f32(3 * c_.dim);
      qkv_t_ = f32(3 * c_.dim);
      attn_ = f32(c_.dim);
      ff_ = f32(c_.ffn_dim);
      if (linear_dtype_ == DType::bf16)
        linear_in_ = Tensor::empty({n, std::max(c_.dim, c_.ffn_dim)}, DType::bf16, device_);
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
    cast(view(buffer, {n, width}), Tensor::view(linear_in_.data(), DType::bf16, device_, {n, width}), stream());
    return linear_in_.data();
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

  // Every launch of one forward pass, on the model's stream, with no host synchronization and
  // no allocation: ids_ holds the n tokens; logits_ receives the last logit_rows rows.
  void launch_forward(std::int64_t n, KvCache& cache, std::int64_t logit_rows) {
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

  Gpt2Config c_;
  Device device_;
  CudaGraphStep step_;
  DType linear_dtype_ = DType::f32;
  float scale_ = 1.0f;
  cudaStream_t stream_ = nullptr;
  std::int32_t* pinned_id_ = nullptr;
  std::unique_ptr<CublasLt> lt_;
  std::unique_ptr<AttentionBackend> attention_;

  std::vector<DeviceLayer> layers_;
  Tensor wte_;              // [vocab, dim] f32
  Tensor lm_head_;          // [vocab, dim], the linear layers' dtype (wte_ itself when tied and f32)
  Tensor wpe_;              // [n_positions, dim] f32
  Tensor ln_f_w_, ln_f_b_;  // [dim] f32
  Tensor flag_;             // [3] i64: embedding's bad-id record (ids are checked on the host first)

  // Activations, [tokens_cap_, width] f32; qkv_t_ is c_attn's output transposed on its way to
  // q | k | v blocks; linear_in_ is the bf16 copy of a linear layer's input.
  std::int64_t tokens_cap_ = 0, logit_rows_cap_ = 0;
  Tensor ids_, x_, xn_, qkv_, qkv_t_, attn_, ff_, linear_in_, logits_;
  std::vector<float> host_logits_;
  std::int32_t device_token_ = -1;  // ids_[0] as last written (-1: unknown)
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
