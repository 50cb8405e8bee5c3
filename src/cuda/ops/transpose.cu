// Batched transpose through a 32 x 32 shared-memory tile: a warp reads 32 consecutive elements
// of an input row and later writes 32 consecutive elements of an output row, so both global
// sides are coalesced. The tile's rows are padded to 33 elements, which puts the 32 elements of
// a tile column in 32 different banks for 4- and 2-byte types. The data only moves, so the
// kernel works on unsigned integers of the element's size and serves every dtype.
#include <cstdint>

#include "cuda/common/launch.cuh"
#include "cuda/ops/transpose.h"

namespace ignis::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // a block is 32 x 8 threads; each moves 4 elements

// x: [batch, rows, cols] -> y: [batch, cols, rows].
template <class U>
__global__ void __launch_bounds__(kTile* kRowsPerPass)
    transpose_kernel(const U* __restrict__ x, U* __restrict__ y, long long batch, long long rows, long long cols) {
  __shared__ U tile[kTile][kTile + 1];
  const long long r0 = static_cast<long long>(blockIdx.y) * kTile;
  const long long c0 = static_cast<long long>(blockIdx.x) * kTile;
  for (long long z = blockIdx.z; z < batch; z += gridDim.z) {
    const U* in = x + z * rows * cols;
    U* out = y + z * rows * cols;
    const long long c = c0 + threadIdx.x;
    for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
      const long long r = r0 + i;
      if (r < rows && c < cols) tile[i][threadIdx.x] = in[r * cols + c];
    }
    __syncthreads();
    // Output row c0 + i holds input column c0 + i; its elements are input rows r0 + threadIdx.x.
    const long long r = r0 + threadIdx.x;
    for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
      const long long oc = c0 + i;
      if (oc < cols && r < rows) out[oc * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();  // the next batch entry overwrites the tile
  }
}

// x: [batch, rows, cols] -> y: [batch, cols, rows].
template <class U>
void launch(const Tensor& x, const Tensor& y, long long batch, long long rows, long long cols, Stream stream) {
  check_arg(rows <= 65535LL * kTile, "cuda::transpose", "rows", detail::lazy_concat("<= ", 65535LL * kTile), rows);
  const dim3 grid(ceil_div(cols, kTile), ceil_div(rows, kTile), static_cast<unsigned>(batch < 65535 ? batch : 65535));
  const dim3 block(kTile, kRowsPerPass);
  transpose_kernel<U><<<grid, block, 0, to_cuda(stream)>>>(x.data_as<const U>(), y.data_as<U>(), batch, rows, cols);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

void transpose(const Tensor& x, const Tensor& y, std::int64_t batch, std::int64_t rows, std::int64_t cols,
               Stream stream) {
  if (batch == 0 || rows == 0 || cols == 0) return;
  switch (dtype_size(x.dtype())) {
    case 1: return launch<std::uint8_t>(x, y, batch, rows, cols, stream);
    case 2: return launch<std::uint16_t>(x, y, batch, rows, cols, stream);
    case 4: return launch<std::uint32_t>(x, y, batch, rows, cols, stream);
    case 8: return launch<std::uint64_t>(x, y, batch, rows, cols, stream);
    default: fail_expected("cuda::transpose", "element size", "1, 2, 4 or 8 bytes", dtype_size(x.dtype()));
  }
}

}  // namespace ignis::cuda
