#pragma once
// The row stages of the norm backward (norm_backward.cu's backward_staged): a ring of shared-memory
// stages that rows of x and dy stream through, filled by bulk copies (sm_90) or per-thread cp.async.
#include <cuda_runtime.h>

#include "cuda/common/bulk_copy.cuh"

namespace ignis::cuda::norm {

__device__ __forceinline__ void copy_pack(void* smem_dst, const void* src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed copy groups are still in flight.
template <int N>
__device__ __forceinline__ void wait_copies_but() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The ring of S row stages of backward_staged, taken R rows a step: row i of the group lands in
// stage i % S (counted, not divided: a 64-bit modulo was ~20 instructions a row), S - R rows ahead
// of the rows computed. Two ways to fill a stage:
// - kBulk on sm_90: thread 0 fills a stage with two bulk copies (the block's slices of x and dy)
//   and the stage's mbarrier says when they have landed; a step's refills go out after its first
//   block barrier (after_first_barrier), when every thread is done with the previous step's rows.
//   The per-thread cp.async it replaced (4 copies and their addressing a thread a row) left warps
//   waiting on their rows (ncu long-scoreboard stalls, H100); the bulk copies gained 1-8 points of
//   copy in 10 of 12 benchmark cases (H100, PERF_NOTES session 4).
// - otherwise (and before sm_90): each thread copies the packs it reads itself with cp.async, so it
//   refills in wait_rows, before waiting, without a block barrier, one commit group a row. That
//   refill starts a step earlier than the bulk path's, which is what LayerNorm's 16-bit rows of
//   4096 columns need (PERF_NOTES session 9).
template <class PackT, int S, int P, bool kBulk = true, int R = 1>
struct RowStages {
  static_assert(R >= 1 && R < S, "a step's rows and at least one row ahead fit the ring");
  // Bulk fills go out after a step's first barrier, so start() alone must put the first step's R
  // rows in flight, or wait_rows waits for copies never issued (4 rows a step in 6 stages hung).
  static_assert(!kBulk || S - R >= R, "bulk fills: the first step's rows are in flight before it waits");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static constexpr bool kBulkCopies = kBulk;
#else
  static constexpr bool kBulkCopies = false;
#endif
  PackT* cache;  // [S][x, dy][slice] packs
  const PackT* x;  // the block's first pack of the group's first row; rows `stride` packs apart
  const PackT* dy;
  unsigned long long* landed;  // [S] mbarriers (bulk copies)
  long long stride, n;  // packs from one of the group's rows to its next; the group's rows
  int slice, count;  // packs a stage holds of each tensor; this block's packs
  int fill = 0, read = 0;
  unsigned parity = 0;

  __device__ void copy(long long i) {
    PackT* stage = cache + fill * 2 * slice;
    if constexpr (kBulkCopies) {
      if (threadIdx.x == 0 && i < n) {
        const unsigned bytes = static_cast<unsigned>(count) * sizeof(PackT);
        expect_bytes(&landed[fill], 2 * bytes);
        fence_before_bulk_copies();  // the stage's previous row was read by the whole block
        bulk_copy_to_shared(stage, x + i * stride, bytes, &landed[fill]);
        bulk_copy_to_shared(stage + slice, dy + i * stride, bytes, &landed[fill]);
      }
    } else {
      if (i < n) {
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const int k = static_cast<int>(threadIdx.x + p * blockDim.x);
          if (k < count) {
            copy_pack(stage + k, x + i * stride + k);
            copy_pack(stage + slice + k, dy + i * stride + k);
          }
        }
      }
      commit_copies();  // empty past the group's end: wait_copies_but<S - R> means "the step landed"
    }
    fill = fill + 1 == S ? 0 : fill + 1;
  }
  // Before the block's first use: barriers set up, the first S - R rows in flight.
  __device__ void start() {
    if constexpr (kBulkCopies) {
      if (threadIdx.x == 0)
        for (int s = 0; s < S; ++s) init_landing_barrier(&landed[s], 1);
      __syncthreads();
    }
    for (int i = 0; i < S - R; ++i) copy(i);
  }
  // The stages of rows i, ..., i + R - 1 once their bytes have landed (rows past the group's end
  // are not waited for; their stages hold nothing).
  __device__ void wait_rows(long long i, const PackT* (&rows)[R]) {
    if constexpr (!kBulkCopies) {
      // The stages these fill were last read by this thread itself, in the previous step.
#pragma unroll
      for (int r = 0; r < R; ++r) copy(i + S - R + r);
      wait_copies_but<S - R>();
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if constexpr (kBulkCopies) {
        if (i + r < n) wait_landed(&landed[read], parity);
      }
      rows[r] = cache + read * 2 * slice;
      if (++read == S) {
        read = 0;
        parity ^= 1;
      }
    }
  }
  __device__ void after_first_barrier(long long i) {
    if constexpr (kBulkCopies) {
#pragma unroll
      for (int r = 0; r < R; ++r) copy(i + S - R + r);
    }
  }
};

}  // namespace ignis::cuda::norm
