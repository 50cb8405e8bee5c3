#include "engine/cuda_attention.h"

#include "ignis/error.h"
#include "ignis/ops/attention.h"

namespace ignis::engine {
namespace {

class CudaAttention final : public AttentionBackend {
 public:
  const char* name() const override { return "cuda-naive"; }
  void prefill(const AttentionBatch& batch, Stream stream) override { run(batch, "CudaAttention::prefill", stream); }
  void decode(const AttentionBatch& batch, Stream stream) override {
    check_arg(batch.q.dim() == 4 && batch.q.size(1) == 1, "CudaAttention::decode", "q.size(1) (n_new)", 1,
              batch.q.dim() == 4 ? batch.q.size(1) : -1);
    run(batch, "CudaAttention::decode", stream);
  }

 private:
  static void run(const AttentionBatch& batch, const char* where, Stream stream) {
    check_attention_batch(batch, where);
    check_arg(batch.device_kv_lengths.has_value(), where, "device_kv_lengths",
              "set (the CUDA kernel reads the lengths on the device)", "none");
    AttentionParams params;
    params.causal = true;
    params.scale = batch.scale;
    attention_naive_kvcache_forward(batch.q, batch.k_cache, batch.v_cache, *batch.device_kv_lengths, batch.out, Tensor(),
                                    params, stream);
  }
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cuda_attention() { return std::make_unique<CudaAttention>(); }

}  // namespace ignis::engine
