// Learned position embedding: one block per token row, its threads striding over the row. The op
// is a row add, memory-bound and tiny next to the layers around it, so plain scalar loads do.
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/ops/position_embedding.h"

namespace ignis::cuda {
namespace {

constexpr int kThreads = 256;

// x: [batch, seqlen, dim], a token row a block; table: [positions, dim]; batch_offsets: [batch] or null.
template <class T>
__global__ void position_embedding_kernel(T* __restrict__ x, const T* __restrict__ table, long long seqlen,
                                          long long dim, long long positions, long long position_offset,
                                          const int* __restrict__ batch_offsets) {
  const long long row = blockIdx.x;  // b * seqlen + s
  const long long b = row / seqlen, s = row % seqlen;
  const long long p = position_offset + (batch_offsets ? batch_offsets[b] : 0) + s;
  if (p < 0 || p >= positions) return;  // only reachable through device offsets: see the header
  T* dst = x + row * dim;
  const T* src = table + p * dim;
  for (long long d = threadIdx.x; d < dim; d += blockDim.x)
    dst[d] = from_float<T>(to_float(dst[d]) + to_float(src[d]));
}

// x: [batch, seqlen, dim]; table: [positions, dim]; batch_offsets: [batch] or null.
template <class T>
void launch(const Tensor& x, const Tensor& table, std::int64_t position_offset, const std::int32_t* batch_offsets,
            Stream stream) {
  const long long rows = x.size(0) * x.size(1);
  position_embedding_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, to_cuda(stream)>>>(
      static_cast<T*>(x.data()), static_cast<const T*>(table.data()), x.size(1), x.size(2), table.size(0),
      position_offset, reinterpret_cast<const int*>(batch_offsets));
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

void position_embedding_add(const Tensor& x, const Tensor& table, std::int64_t position_offset,
                            const std::int32_t* batch_offsets, Stream stream) {
  switch (x.dtype()) {
    case DType::f32: return launch<float>(x, table, position_offset, batch_offsets, stream);
    case DType::f16: return launch<__half>(x, table, position_offset, batch_offsets, stream);
    case DType::bf16: return launch<__nv_bfloat16>(x, table, position_offset, batch_offsets, stream);
    default: throw Error(detail::concat("position_embedding_add: x.dtype: expected f32, f16 or bf16, got ", x.dtype()));
  }
}

}  // namespace ignis::cuda
