#pragma once
// Hopper's (sm_90a) building blocks of the flash kernels: the 128-byte-swizzled shared tiles wgmma reads, their
// descriptors, the warpgroup MMA instructions (S = Q K^T from shared memory, O += P V with P in registers, the
// backward's dQ with both operands transposed), and the asynchronous copies and their synchronization (mbarriers,
// bulk tensor copies and reduce-adds, named barriers).
//
// Shared tiles use the 128-byte swizzle: a tile of R rows x D columns is D/64 column blocks of R rows x 128
// bytes, and the 16-byte chunk c of row r sits at chunk c ^ (r % 8) of its 128-byte line. Tiles start on
// 1024-byte boundaries (the swizzle is applied to address bits 4-9). Q and K are K-major operands (rows of the
// contraction dim), V the MN-major B of P V (its rows are keys, the contraction dim, and a row's 64 columns
// are contiguous).
#include <cuda.h>

#include <cstdint>

#include "cuda/ops/flash_kernel_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define IGNIS_FLASH_WGMMA 1
#endif

namespace ignis::cuda::flash::sm90 {

// The block's register pool of a warp-specialized kernel of `consumers` consumer warpgroups and one producer
// warpgroup: what it launched with, 65536 / threads a thread rounded down to 8 (`-Xptxas -v` reports it): 65536 with
// three consumers, 64512 with two. setmaxnreg counts must fit it, or the consumers' setmaxnreg.inc waits forever.
constexpr int register_pool(int consumers) {
  const int threads = (consumers + 1) * 128;
  return 65536 / threads / 8 * 8 * threads;
}
// Registers each consumer thread may take once the producer's drop to `producer` (a multiple of 8).
constexpr int consumer_registers(int consumers, int producer) {
  return (register_pool(consumers) - 128 * producer) / (128 * consumers) / 8 * 8;
}

// Byte offset of element (row, col) of a swizzled tile of `rows` rows (col a multiple of 8).
__device__ __forceinline__ std::uint32_t swizzled(int rows, int row, int col) {
  const int block = col / 64, chunk = (col % 64) / 8;
  return static_cast<std::uint32_t>(block * rows * 128 + row * 128 + ((chunk ^ (row & 7)) << 4));
}

// A wgmma shared-memory descriptor with the 128-byte swizzle: start address, leading and stride byte offsets
// (PTX ISA "Matrix Descriptor Format"; each field in 16-byte units).
__device__ __forceinline__ std::uint64_t descriptor(std::uint32_t address, std::uint32_t leading_bytes,
                                                    std::uint32_t stride_bytes) {
  return static_cast<std::uint64_t>((address & 0x3FFFF) >> 4) |
         static_cast<std::uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<std::uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | std::uint64_t{1} << 62;
}

#if IGNIS_FLASH_WGMMA
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most `Pending` of this warpgroup's committed MMA groups are still running.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous MMAs.
template <int Tiles>
__device__ __forceinline__ void fence_accumulators(float (&acc)[Tiles][4]) {
#pragma unroll
  for (int j = 0; j < Tiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(acc[j][e])::"memory");
}

// The same for the P fragments an MMA reads from registers: they must stay untouched until it completes.
template <int Steps>
__device__ __forceinline__ void fence_fragments(std::uint32_t (&p)[Steps][4]) {
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(p[kk][e])::"memory");
}

// The wgmma instructions: S (m64n64 or m64n128, fp32) += Q K^T with both operands in shared memory, and O (m64nD) +=
// P V with P in registers and V transposed (MN-major). `accumulate` 0 overwrites S.
template <class T>
struct Wgmma;

#define IGNIS_WGMMA_S(TYPE)                                                                                     \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                                  \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
#define IGNIS_WGMMA_ACC(acc, j)                                                                                 \
  "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
#define IGNIS_WGMMA_ACC4(acc, j0)                                                                               \
  IGNIS_WGMMA_ACC(acc, j0), IGNIS_WGMMA_ACC(acc, j0 + 1), IGNIS_WGMMA_ACC(acc, j0 + 2), IGNIS_WGMMA_ACC(acc, j0 + 3)
#define IGNIS_WGMMA_ACC32(acc, j0) IGNIS_WGMMA_ACC4(acc, j0), IGNIS_WGMMA_ACC4(acc, j0 + 4)
#define IGNIS_WGMMA_S128(TYPE)                                                                                  \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                                  \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "   \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "       \
  "%64, %65, p, 1, 1, 0, 0;\n}\n"
#define IGNIS_WGMMA_PV64(TYPE)                                                                                  \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                                  \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
#define IGNIS_WGMMA_PV128(TYPE)                                                                                 \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                                  \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "   \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "       \
  "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"

#define IGNIS_DEFINE_WGMMA(T, TYPE)                                                                             \
  template <>                                                                                                   \
  struct Wgmma<T> {                                                                                             \
    static __device__ __forceinline__ void s(float (&acc)[8][4], std::uint64_t a, std::uint64_t b,              \
                                             int accumulate) {                                                  \
      asm volatile(IGNIS_WGMMA_S(TYPE) : IGNIS_WGMMA_ACC32(acc, 0) : "l"(a), "l"(b), "r"(accumulate));          \
    }                                                                                                           \
    static __device__ __forceinline__ void s(float (&acc)[16][4], std::uint64_t a, std::uint64_t b,             \
                                             int accumulate) {                                                  \
      asm volatile(IGNIS_WGMMA_S128(TYPE)                                                                       \
                   : IGNIS_WGMMA_ACC32(acc, 0), IGNIS_WGMMA_ACC32(acc, 8)                                       \
                   : "l"(a), "l"(b), "r"(accumulate));                                                          \
    }                                                                                                           \
    static __device__ __forceinline__ void pv(float (&acc)[8][4], const std::uint32_t (&p)[4],                  \
                                              std::uint64_t b) {                                                \
      asm volatile(IGNIS_WGMMA_PV64(TYPE)                                                                       \
                   : IGNIS_WGMMA_ACC32(acc, 0)                                                                  \
                   : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(b), "r"(1));                               \
    }                                                                                                           \
    static __device__ __forceinline__ void pv(float (&acc)[16][4], const std::uint32_t (&p)[4],                 \
                                              std::uint64_t b) {                                                \
      asm volatile(IGNIS_WGMMA_PV128(TYPE)                                                                      \
                   : IGNIS_WGMMA_ACC32(acc, 0), IGNIS_WGMMA_ACC32(acc, 8)                                       \
                   : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(b), "r"(1));                               \
    }                                                                                                           \
  };
IGNIS_DEFINE_WGMMA(__nv_bfloat16, "bf16")
IGNIS_DEFINE_WGMMA(__half, "f16")

// The backward's dQ = dS K: m64nNk16 with A and B both MN-major in shared memory (transpose flags 1, 1);
// N = 64 or 32.
template <class T>
struct WgmmaTransposed;

#define IGNIS_WGMMA_TT64(TYPE)                                                                                  \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                                  \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
#define IGNIS_WGMMA_TT32(TYPE)                                                                                  \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                                                  \
  "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 1, 1;\n}\n"

#define IGNIS_DEFINE_WGMMA_TT(T, TYPE)                                                                          \
  template <>                                                                                                   \
  struct WgmmaTransposed<T> {                                                                                   \
    static __device__ __forceinline__ void mma(float (&acc)[8][4], std::uint64_t a, std::uint64_t b,            \
                                               int accumulate) {                                                \
      asm volatile(IGNIS_WGMMA_TT64(TYPE)                                                                       \
                   : IGNIS_WGMMA_ACC32(acc, 0)                                                                  \
                   : "l"(a), "l"(b), "r"(accumulate));                                                          \
    }                                                                                                           \
    static __device__ __forceinline__ void mma(float (&acc)[4][4], std::uint64_t a, std::uint64_t b,            \
                                               int accumulate) {                                                \
      asm volatile(IGNIS_WGMMA_TT32(TYPE) : IGNIS_WGMMA_ACC4(acc, 0) : "l"(a), "l"(b), "r"(accumulate));        \
    }                                                                                                           \
  };
IGNIS_DEFINE_WGMMA_TT(__nv_bfloat16, "bf16")
IGNIS_DEFINE_WGMMA_TT(__half, "f16")
#undef IGNIS_DEFINE_WGMMA
#undef IGNIS_DEFINE_WGMMA_TT
#undef IGNIS_WGMMA_TT64
#undef IGNIS_WGMMA_TT32
#undef IGNIS_WGMMA_S
#undef IGNIS_WGMMA_S128
#undef IGNIS_WGMMA_ACC32
#undef IGNIS_WGMMA_ACC4
#undef IGNIS_WGMMA_ACC
#undef IGNIS_WGMMA_PV64
#undef IGNIS_WGMMA_PV128
#endif

#if IGNIS_FLASH_WGMMA
// An mbarrier in shared memory: a phase completes when `count` threads have arrived and the bytes announced by
// expect_bytes have landed; waits name the phase by its parity (0, 1, 0, ...).
__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Arrives, and announces `bytes` more that bulk copies will complete on the barrier's current phase.
__device__ __forceinline__ void mbarrier_expect_bytes(std::uint32_t bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint32_t bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// Named barrier `id` (1..15; 0 is __syncthreads') over `threads` threads, some waiting (sync) and some only
// arriving.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// One box of a 4-D tensor map into shared memory at `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load(std::uint32_t dst, const CUtensorMap* map, int column, int head, int row,
                                         int batch, std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(column), "r"(head), "r"(row), "r"(batch), "r"(bar)
      : "memory");
}
// Adds the box at shared address `src` into a 4-D tensor map's box in global memory (fp32 adds done by L2; rows
// past the tensor are skipped), as a bulk async group of the calling thread once committed.
__device__ __forceinline__ void tma_reduce_add(const CUtensorMap* map, std::uint32_t src, int column, int head,
                                               int row, int batch) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(
          reinterpret_cast<std::uint64_t>(map)),
      "r"(column), "r"(head), "r"(row), "r"(batch), "r"(src)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until the calling thread's committed bulk groups have read their shared sources.
__device__ __forceinline__ void bulk_wait_sources_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Waits until the calling thread's committed bulk groups have completed.
__device__ __forceinline__ void bulk_wait_done() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
#endif

}  // namespace ignis::cuda::flash::sm90
