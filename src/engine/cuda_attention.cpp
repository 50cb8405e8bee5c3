#include "engine/cuda_attention.h"

#include <algorithm>
#include <string>

#include "ignis/error.h"
#include "ignis/ops/attention.h"
#include "ignis/ops/attention_decode.h"
#include "ignis/ops/flash_attention.h"

namespace ignis::engine {
namespace {

class CudaAttention final : public AttentionBackend {
 public:
  // Which kernels the last calls used (the choice depends on the cache's dtype and head_dim).
  const char* name() const override {
    name_ = "cuda (prefill: " + std::string(prefill_) + ", decode: " + decode_ + ")";
    return name_.c_str();
  }

  void prefill(const AttentionBatch& batch, Stream stream) override {
    check_ready(batch, "CudaAttention::prefill");
    if (flash_attention_supported(batch.q.device(), batch.q.dtype()) &&
        flash_attention_head_dim_supported(batch.q.size(3))) {
      prefill_ = "flash";
      // The lengths are known here, so the kernel's schedule is planned for the longest rather than the cache's
      // capacity.
      const std::int64_t longest = *std::max_element(batch.kv_lengths.begin(), batch.kv_lengths.end());
      flash_attention_kvcache_forward(batch.q, batch.k_cache, batch.v_cache, *batch.device_kv_lengths, batch.out,
                                      Tensor(), params(batch), 0, stream, longest);
    } else {
      prefill_ = "naive";
      attention_naive_kvcache_forward(batch.q, batch.k_cache, batch.v_cache, *batch.device_kv_lengths, batch.out,
                                      Tensor(), params(batch), stream);
    }
  }

  void decode(const AttentionBatch& batch, Stream stream) override {
    constexpr const char* kWhere = "CudaAttention::decode";
    check_arg(batch.q.dim() == 4 && batch.q.size(1) == 1, kWhere, "q.size(1) (n_new)", 1,
              batch.q.dim() == 4 ? batch.q.size(1) : -1);
    check_ready(batch, kWhere);
    if (attention_decode_supported(batch.q.device(), batch.q.dtype()) &&
        attention_decode_head_dim_supported(batch.q.size(3))) {
      decode_ = "split-k";
      // An owned workspace: the first (plain) step of a cache allocates it, so the captured graph
      // replays kernels only.
      const std::int64_t bytes = attention_decode_workspace_bytes(
          batch.q.size(0), batch.k_cache.size(1), batch.q.size(2), batch.k_cache.size(2), batch.q.size(3));
      if (!workspace_.defined() || workspace_.numel() < bytes || workspace_.device() != batch.q.device())
        workspace_ = Tensor::empty({bytes}, DType::u8, batch.q.device());
      attention_decode_forward(batch.q, batch.k_cache, batch.v_cache, *batch.device_kv_lengths, batch.out,
                               params(batch), workspace_, stream);
    } else {
      decode_ = "naive";
      attention_naive_kvcache_forward(batch.q, batch.k_cache, batch.v_cache, *batch.device_kv_lengths, batch.out,
                                      Tensor(), params(batch), stream);
    }
  }

 private:
  static void check_ready(const AttentionBatch& batch, const char* where) {
    check_attention_batch(batch, where);
    check_arg(batch.device_kv_lengths.has_value(), where, "device_kv_lengths",
              "set (the CUDA kernels read the lengths on the device)", "none");
  }
  static AttentionParams params(const AttentionBatch& batch) {
    AttentionParams p;
    p.causal = true;
    p.scale = batch.scale;
    return p;
  }

  const char* prefill_ = "not run yet";
  const char* decode_ = "not run yet";
  mutable std::string name_;
  Tensor workspace_;  // [bytes] u8: the split-k partials
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cuda_attention() { return std::make_unique<CudaAttention>(); }

}  // namespace ignis::engine
