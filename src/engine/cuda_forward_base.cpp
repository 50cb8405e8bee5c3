#include "engine/cuda_forward_base.h"

#if IGNIS_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "engine/cuda_attention.h"
#include "ignis/error.h"
#include "ignis/ops/cast.h"
#include "ignis/ops/embedding.h"
#include "ignis/ops/sampling.h"

namespace ignis::engine {

Tensor upload_f32(const float* values, Shape shape, Device device) {
  return Tensor::view(const_cast<float*>(values), DType::f32, Device::cpu(), std::move(shape)).to(device);
}

Tensor upload_f32(const std::vector<float>& values, Device device) {
  return upload_f32(values.data(), {static_cast<std::int64_t>(values.size())}, device);
}

Tensor upload_stacked(std::initializer_list<const LinearWeight*> parts, WeightFormat format, Device device,
                      const char* where) {
  const std::int64_t cols = (*parts.begin())->cols();
  std::int64_t rows = 0;
  for (const LinearWeight* w : parts) {
    check_arg(w->format() == format, where, "weights.format (one format for every linear layer)",
              weight_format_name(format), weight_format_name(w->format()));
    check_arg(w->cols() == cols, where, "stacked weights' cols", cols, w->cols());
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

Tensor upload_embedding(const LinearWeight& table, Device device) {
  std::vector<float> values(static_cast<std::size_t>(table.rows() * table.cols()));
  for (std::int64_t r = 0; r < table.rows(); ++r) table.row_to_f32(r, values.data() + r * table.cols());
  return upload_f32(values.data(), {table.rows(), table.cols()}, device);
}

DType cuda_linear_dtype(WeightFormat format, const char* where) {
  check_arg(format == WeightFormat::f32 || format == WeightFormat::bf16, where, "weights.format",
            "f32 or bf16 on CUDA", weight_format_name(format));
  return format == WeightFormat::bf16 ? DType::bf16 : DType::f32;
}

CudaForwardBase::CudaForwardBase(const CudaForwardOptions& options, DType linear_dtype, std::int64_t vocab_size,
                                 std::int64_t linear_in_width, const char* where)
    : device_(options.device),
      linear_dtype_(linear_dtype),
      vocab_(vocab_size),
      linear_in_width_(linear_in_width),
      where_(where),
      step_(options.graphs) {
  check_arg(device_.is_cuda(), where_, "device", "cuda", device_);
  IGNIS_CUDA_CHECK(cudaSetDevice(device_.index));
  cudaStream_t stream = nullptr;
  IGNIS_CUDA_CHECK(cudaStreamCreate(&stream));  // blocking: synchronous copies on the default stream wait for it
  stream_ = stream;
  IGNIS_CUDA_CHECK(cudaMallocHost(&pinned_id_, sizeof(std::int32_t)));
  lt_ = std::make_unique<CublasLt>(device_);
  attention_ = make_cuda_attention();
}

CudaForwardBase::~CudaForwardBase() {
  // Destructors must not throw: failures here leak at worst.
  cudaStreamSynchronize(stream_);
  step_.drop();
  if (pinned_id_) cudaFreeHost(pinned_id_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaForwardBase::finish_setup() {
  flag_ = Tensor::empty({3}, DType::i64, device_);
  embedding_clear_flag(flag_, stream());
  ensure_buffers(1, 1);
  IGNIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Tensor CudaForwardBase::view(const Tensor& buffer, Shape shape, std::int64_t offset) const {
  char* first = buffer.data_as<char>() + offset * static_cast<std::int64_t>(dtype_size(buffer.dtype()));
  return Tensor::view(first, buffer.dtype(), device_, std::move(shape));
}

const void* CudaForwardBase::linear_input(const Tensor& buffer, std::int64_t n, std::int64_t width) {
  if (linear_dtype_ == DType::f32) return buffer.data();
  cast(view(buffer, {n, width}), view(linear_in_, {n, width}), stream());
  return linear_in_.data();
}

// Reallocating moves buffers a captured graph points at, so it drops the graph.
void CudaForwardBase::ensure_buffers(std::int64_t n, std::int64_t logit_rows) {
  if (n > tokens_cap_) {
    step_.drop();
    tokens_cap_ = n;
    ids_ = Tensor::empty({n}, DType::i32, device_);
    device_token_ = -1;
    if (linear_dtype_ == DType::bf16) linear_in_ = Tensor::empty({n, linear_in_width_}, DType::bf16, device_);
    allocate_activations(n);
  }
  if (logit_rows > logit_rows_cap_) {
    step_.drop();
    logit_rows_cap_ = logit_rows;
    logits_ = Tensor::empty({logit_rows, vocab_}, DType::f32, device_);
  }
}

void CudaForwardBase::run(std::span<const std::int32_t> tokens, KvCache& cache, std::int64_t logit_rows) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  check_device(cache.k(0), device_, where_, "cache");
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

std::span<const float> CudaForwardBase::forward(std::span<const std::int32_t> tokens, KvCache& cache,
                                                bool all_logits) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t rows = all_logits ? n : 1;
  run(tokens, cache, rows);
  host_logits_.resize(static_cast<std::size_t>(rows * vocab_));
  IGNIS_CUDA_CHECK(cudaMemcpyAsync(host_logits_.data(), logits_.data(), host_logits_.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream_));
  IGNIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return host_logits_;
}

std::int32_t CudaForwardBase::forward_sample(std::span<const std::int32_t> tokens, KvCache& cache,
                                             const SamplingParams& params) {
  run(tokens, cache, 1);
  // The id lands where the next step's embedding reads its token.
  sample(view(logits_, {1, vocab_}), params, view(ids_, {1}), stream());
  IGNIS_CUDA_CHECK(cudaMemcpyAsync(pinned_id_, ids_.data(), sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream_));
  IGNIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  device_token_ = *pinned_id_;
  return device_token_;
}

}  // namespace ignis::engine

#endif
