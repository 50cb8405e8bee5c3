#pragma once
// What the CUDA forwards (engine/cuda_llama.cpp, engine/cuda_gpt2.cpp) share: the model's stream,
// cuBLASLt, the attention backend, the decode step's CUDA graph, the token ids and logits on the
// device, and forward / forward_sample on top of each model's launch_forward. Only for builds with
// CUDA (its users include it under IGNIS_WITH_CUDA).
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "engine/cuda_graph_step.h"
#include "engine/cuda_linear.h"
#include "engine/cuda_llama.h"
#include "engine/linear.h"

struct CUstream_st;  // cudaStream_t, without the CUDA headers

namespace ignis::engine {

// values: [shape...] f32 on the host, copied to `device`.
Tensor upload_f32(const float* values, Shape shape, Device device);
Tensor upload_f32(const std::vector<float>& values, Device device);
// The rows of linear layers of one width and format (f32 or bf16) stacked into one
// [sum of rows, cols] matrix (one layer alone is its plain upload). Throws ignis::Error (`where`)
// for another format or a different width.
Tensor upload_stacked(std::initializer_list<const LinearWeight*> parts, WeightFormat format, Device device,
                      const char* where);
// The whole table widened to f32: a lookup reads one row per token, so its width costs nothing.
Tensor upload_embedding(const LinearWeight& table, Device device);
// bf16 or f32, the dtype of the linear layers for weights stored as `format`; throws otherwise.
DType cuda_linear_dtype(WeightFormat format, const char* where);

class CudaForwardBase : public CudaForward {
 public:
  ~CudaForwardBase() override;
  CudaForwardBase(const CudaForwardBase&) = delete;
  CudaForwardBase& operator=(const CudaForwardBase&) = delete;

  const AttentionBackend& attention() const override { return *attention_; }
  std::int64_t graph_replays() const override { return step_.replays(); }
  std::span<const float> forward(std::span<const std::int32_t> tokens, KvCache& cache, bool all_logits) override;
  std::int32_t forward_sample(std::span<const std::int32_t> tokens, KvCache& cache,
                              const SamplingParams& params) override;

 protected:
  // linear_in_width: the widest input of a linear layer, for the bf16 copy of one.
  CudaForwardBase(const CudaForwardOptions& options, DType linear_dtype, std::int64_t vocab_size,
                  std::int64_t linear_in_width, const char* where);
  // The end of a model's constructor: buffers for one token, the embedding flag cleared, uploads done.
  void finish_setup();

  // Every launch of one forward pass, on the model's stream, with no host synchronization and no
  // allocation: ids_ holds the n tokens; logits_ receives the last logit_rows rows.
  virtual void launch_forward(std::int64_t n, KvCache& cache, std::int64_t logit_rows) = 0;
  // The model's activation buffers for n tokens; called outside any graph capture, when n grows.
  virtual void allocate_activations(std::int64_t n) = 0;

  Stream stream() const { return Stream{stream_}; }
  // For ops whose weights never change: each may start while the kernel before it finishes.
  Stream overlapped() const { return Stream{stream_, true}; }
  // `shape` over a buffer (any shape, contiguous), from its element `offset` on.
  Tensor view(const Tensor& buffer, Shape shape, std::int64_t offset = 0) const;
  // The input of a linear layer: the f32 activations [n, width] themselves, or their bf16 copy.
  const void* linear_input(const Tensor& buffer, std::int64_t n, std::int64_t width);

  Device device_;
  DType linear_dtype_;
  std::unique_ptr<CublasLt> lt_;
  std::unique_ptr<AttentionBackend> attention_;
  Tensor flag_;    // [3] i64: embedding's bad-id record (ids are checked on the host first)
  Tensor ids_;     // [tokens_cap_] i32: the tokens of the pass
  Tensor logits_;  // [logit_rows_cap_, vocab] f32

 private:
  void ensure_buffers(std::int64_t n, std::int64_t logit_rows);
  // tokens: [n] ids.
  void run(std::span<const std::int32_t> tokens, KvCache& cache, std::int64_t logit_rows);

  std::int64_t vocab_, linear_in_width_;
  const char* where_;
  CUstream_st* stream_ = nullptr;
  std::int32_t* pinned_id_ = nullptr;
  CudaGraphStep step_;
  std::int64_t tokens_cap_ = 0, logit_rows_cap_ = 0;
  Tensor linear_in_;  // [tokens_cap_, linear_in_width_] bf16, with bf16 weights only
  std::vector<float> host_logits_;
  std::int32_t device_token_ = -1;  // ids_[0] as last written (-1: unknown)
};

}  // namespace ignis::engine
