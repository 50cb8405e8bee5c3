// Tiled batched GEMM, the simple baseline (no tensor cores): a block computes a 64 x 64 tile of C
// from 64 x 16 slices of A and 16 x 64 slices of B staged in shared memory; each of its 256
// threads owns a 4 x 4 register tile of C. The thread's rows and columns are strided by 16
// rather than adjacent, so the shared-memory reads of B are conflict free and the stores of C
// are coalesced. Bounds are checked on every load and store, so any m, n, k works.
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/ops/gemm.h"

namespace ignis::cuda {
namespace {

constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kTileK = 16;
constexpr int kThreads = 256;
constexpr int kRegM = kTileM / (kThreads / 16);  // 4 rows per thread, 16 apart
constexpr int kRegN = kTileN / 16;               // 4 columns per thread, 16 apart
// A (and B^T) slices are stored transposed; a row length of 66 makes the transposing stores of
// a warp land on 32 distinct banks.
constexpr int kPad = 2;

// fp32 accumulation for every storage type but f64.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
__device__ __forceinline__ Acc<T> load_acc(const T* p) {
  if constexpr (std::is_same_v<T, double>)
    return *p;
  else
    return to_float(*p);
}

template <class T>
__device__ __forceinline__ void store_acc(T* p, Acc<T> v) {
  if constexpr (std::is_same_v<T, double>)
    *p = v;
  else
    *p = from_float<T>(v);
}

template <class T>
__device__ __forceinline__ T* matrix_at(const GemmOperand& op, long long z, long long inner_count) {
  const long long outer = z / inner_count;
  const long long inner = z % inner_count;
  return static_cast<T*>(const_cast<void*>(op.data)) + outer * op.outer_stride + (inner / op.group) * op.inner_stride;
}

// Stages rows [row0, row0 + 64) x columns [k0, k0 + 16) of a row-major [rows, k] matrix into
// tile[kk][r], zero outside the matrix. 16 consecutive threads read 16 consecutive k of one row.
template <class T>
__device__ __forceinline__ void stage_transposed(Acc<T> (&tile)[kTileK][kTileM + kPad], const T* src, long long ld,
                                                 long long row0, long long rows, long long k0, long long k) {
  const int kk = threadIdx.x % kTileK;
  const long long gk = k0 + kk;
#pragma unroll
  for (int i = 0; i < kTileM / (kThreads / kTileK); ++i) {
    const int r = threadIdx.x / kTileK + i * (kThreads / kTileK);
    const long long gr = row0 + r;
    tile[kk][r] = gr < rows && gk < k ? load_acc(src + gr * ld + gk) : Acc<T>(0);
  }
}

template <class T, bool TransB>
__global__ void __launch_bounds__(kThreads) gemm_kernel(const GemmProblem p) {
  using A = Acc<T>;
  __shared__ A a_tile[kTileK][kTileM + kPad];  // a_tile[kk][r] = A(row0 + r, k0 + kk)
  __shared__ A b_tile[kTileK][kTileN + kPad];  // b_tile[kk][c] = B(k0 + kk, col0 + c)
  static_assert(kTileN == kTileM, "stage_transposed fills both tiles");

  const int tid = threadIdx.x;
  const int tx = tid % 16;
  const int ty = tid / 16;
  const long long row0 = static_cast<long long>(blockIdx.y) * kTileM;
  const long long col0 = static_cast<long long>(blockIdx.x) * kTileN;
  const A alpha = static_cast<A>(p.alpha);
  const A beta = static_cast<A>(p.beta);

  for (long long z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const T* a = matrix_at<T>(p.a, z, p.inner_count);
    const T* b = matrix_at<T>(p.b, z, p.inner_count);
    T* c = matrix_at<T>(p.c, z, p.inner_count);

    A acc[kRegM][kRegN];
#pragma unroll
    for (int i = 0; i < kRegM; ++i)
#pragma unroll
      for (int j = 0; j < kRegN; ++j) acc[i][j] = A(0);

    for (long long k0 = 0; k0 < p.k; k0 += kTileK) {
      stage_transposed(a_tile, a, p.a.ld, row0, p.m, k0, p.k);
      if constexpr (TransB) {
        stage_transposed(b_tile, b, p.b.ld, col0, p.n, k0, p.k);
      } else {
        // 64 consecutive threads read one 64-wide row segment of B.
        const int cc = tid % kTileN;
        const long long gc = col0 + cc;
#pragma unroll
        for (int i = 0; i < kTileK / (kThreads / kTileN); ++i) {
          const int kb = tid / kTileN + i * (kThreads / kTileN);
          const long long gkb = k0 + kb;
          b_tile[kb][cc] = gc < p.n && gkb < p.k ? load_acc(b + gkb * p.b.ld + gc) : A(0);
        }
      }
      __syncthreads();
#pragma unroll
      for (int q = 0; q < kTileK; ++q) {
        A av[kRegM], bv[kRegN];
#pragma unroll
        for (int i = 0; i < kRegM; ++i) av[i] = a_tile[q][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < kRegN; ++j) bv[j] = b_tile[q][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < kRegM; ++i)
#pragma unroll
          for (int j = 0; j < kRegN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
      }
      __syncthreads();  // the next slice overwrites the tiles
    }

#pragma unroll
    for (int i = 0; i < kRegM; ++i) {
      const long long gr = row0 + ty + 16 * i;
      if (gr >= p.m) continue;
#pragma unroll
      for (int j = 0; j < kRegN; ++j) {
        const long long gc = col0 + tx + 16 * j;
        if (gc >= p.n) continue;
        T* out = c + gr * p.c.ld + gc;
        A v = alpha * acc[i][j];
        if (beta != A(0)) v += beta * load_acc(out);  // beta == 0 never reads C, which may be NaN
        if (gc > gr + p.mask_diagonal) v = -INFINITY;
        store_acc(out, v);
      }
    }
  }
}

template <class T>
void launch(const GemmProblem& p, Stream stream) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return;
  check_arg(p.m <= 65535LL * kTileM, "cuda::gemm", "m", detail::lazy_concat("<= ", 65535LL * kTileM), p.m);
  const dim3 grid(ceil_div(p.n, kTileN), ceil_div(p.m, kTileM),
                  static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  if (p.trans_b)
    gemm_kernel<T, true><<<grid, kThreads, 0, to_cuda(stream)>>>(p);
  else
    gemm_kernel<T, false><<<grid, kThreads, 0, to_cuda(stream)>>>(p);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

void gemm(const GemmProblem& problem, DType dtype, Stream stream) {
  switch (dtype) {
    case DType::f64: return launch<double>(problem, stream);
    case DType::f32: return launch<float>(problem, stream);
    case DType::f16: return launch<__half>(problem, stream);
    case DType::bf16: return launch<__nv_bfloat16>(problem, stream);
    default: fail_expected("cuda::gemm", "dtype", "f64, f32, f16 or bf16", dtype);
  }
}

}  // namespace ignis::cuda
