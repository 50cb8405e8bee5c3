#pragma once
// Flash attention forward on Hopper's warpgroup MMA (wgmma, sm_90a): the kernel flash_attention.cu launches
// on compute capability 9.0.
//
// One block of two warpgroups (three at head_dim 128) per (128 or 192 query rows, query head, sequence);
// warpgroup w owns rows 64w..64w+63, and within it warp i rows 16i..16i+15, in the C layout of
// flash_kernel_common.cuh. Per key tile of 64: S = Q K^T is one chain of D/16 wgmma m64n64k16 (A = Q and
// B = K, both from shared memory), the softmax runs on S's registers as in the mma.sync kernel, and O += P V
// is one chain of four wgmma m64nDk16 with P from registers (its A fragment is the mma.sync one) and V from
// shared memory. Tile n's Q K^T and tile n-1's P V are issued together, so tile n's softmax runs while P V
// is on the tensor cores. Every thread copies tile n+1 with cp.async meanwhile, into the third of three
// K/V stages (tile n's K and tile n-1's V are being read). See docs/PERF_NOTES.md "# Session 33".
//
// Shared tiles use the 128-byte swizzle wgmma reads: a tile of R rows x D columns is D/64 column blocks of
// R rows x 128 bytes, and the 16-byte chunk c of row r sits at chunk c ^ (r % 8) of its 128-byte line.
// Q and K are K-major operands (rows of the contraction dim), V the MN-major B of P V (its rows are keys,
// the contraction dim, and a row's 64 columns are contiguous).
#include <cstdint>
#include <utility>

#include "cuda/ops/flash_kernel_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define IGNIS_FLASH_WGMMA 1
#endif

namespace ignis::cuda::flash::sm90 {

inline constexpr int kBlockN = 64;  // keys a tile
inline constexpr int kStages = 3;   // K/V tiles in shared memory at once

template <int D>
struct Layout {
  // A 128-dim block needs 156 registers a thread, so an SM holds one: three warpgroups keep more warps on it
  // than two. A 64-dim one (116 registers) fits twice with two.
  static constexpr int kWarpgroups = D == 128 ? 3 : 2;
  static constexpr int kThreads = kWarpgroups * 128;
  static constexpr int kBlockM = kWarpgroups * 64;             // query rows a block
  static constexpr int kQBytes = kBlockM * D * 2;              // D/64 column blocks of kBlockM lines
  static constexpr int kKvBytes = kBlockN * D * 2;             // D/64 column blocks of kBlockN lines
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kKvBytes + 1024;  // Q, K and V stages, room to align
};

// Byte offset of element (row, col) of a swizzled tile of `rows` rows (col a multiple of 8).
__device__ __forceinline__ std::uint32_t swizzled(int rows, int row, int col) {
  const int block = col / 64, chunk = (col % 64) / 8;
  return static_cast<std::uint32_t>(block * rows * 128 + row * 128 + ((chunk ^ (row & 7)) << 4));
}

// Copies rows [row0, row0 + Rows) of one head into a swizzled tile at shared address `tile`; rows at or past
// `rows` become zeros. base: [rows, D], rows row_stride elements apart.
template <class T, int D, int Rows, int Threads>
__device__ __forceinline__ void load_swizzled(std::uint32_t tile, const T* base, long long row_stride, int row0,
                                              int rows) {
  constexpr int kChunks = D / 8;
  for (int c = threadIdx.x; c < Rows * kChunks; c += Threads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool valid = row0 + r < rows;
    const T* src = valid ? base + static_cast<long long>(row0 + r) * row_stride + col : base;
    cp_async_16(tile + swizzled(Rows, r, col), src, valid);
  }
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

// The wgmma instructions: S (m64n64, fp32) += Q K^T with both operands in shared memory, and O (m64nD) +=
// P V with P in registers and V transposed (MN-major). `accumulate` 0 overwrites S.
template <class T>
struct Wgmma;

#define IGNIS_WGMMA_S(TYPE)                                                                                     \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                                  \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
#define IGNIS_WGMMA_ACC32(acc, j0)                                                                              \
  "+f"(acc[j0 + 0][0]), "+f"(acc[j0 + 0][1]), "+f"(acc[j0 + 0][2]), "+f"(acc[j0 + 0][3]),                       \
      "+f"(acc[j0 + 1][0]), "+f"(acc[j0 + 1][1]), "+f"(acc[j0 + 1][2]), "+f"(acc[j0 + 1][3]),                   \
      "+f"(acc[j0 + 2][0]), "+f"(acc[j0 + 2][1]), "+f"(acc[j0 + 2][2]), "+f"(acc[j0 + 2][3]),                   \
      "+f"(acc[j0 + 3][0]), "+f"(acc[j0 + 3][1]), "+f"(acc[j0 + 3][2]), "+f"(acc[j0 + 3][3]),                   \
      "+f"(acc[j0 + 4][0]), "+f"(acc[j0 + 4][1]), "+f"(acc[j0 + 4][2]), "+f"(acc[j0 + 4][3]),                   \
      "+f"(acc[j0 + 5][0]), "+f"(acc[j0 + 5][1]), "+f"(acc[j0 + 5][2]), "+f"(acc[j0 + 5][3]),                   \
      "+f"(acc[j0 + 6][0]), "+f"(acc[j0 + 6][1]), "+f"(acc[j0 + 6][2]), "+f"(acc[j0 + 6][3]),                   \
      "+f"(acc[j0 + 7][0]), "+f"(acc[j0 + 7][1]), "+f"(acc[j0 + 7][2]), "+f"(acc[j0 + 7][3])
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
#undef IGNIS_DEFINE_WGMMA
#undef IGNIS_WGMMA_S
#undef IGNIS_WGMMA_S128
#undef IGNIS_WGMMA_ACC32
#undef IGNIS_WGMMA_PV64
#undef IGNIS_WGMMA_PV128
#endif

// grid: (query tiles * splits, heads_q, batch); see plan_block. Compiled for sm_90a only (elsewhere the body
// traps; the launcher picks it on compute capability 9.0, which the default build targets with sm_90a code).
template <class T, int D>
__global__ void __launch_bounds__(Layout<D>::kThreads) flash_forward_wgmma_kernel(const Args a) {
#if IGNIS_FLASH_WGMMA
  using L = Layout<D>;
  constexpr int kBlockM = L::kBlockM, kThreads = L::kThreads;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The swizzle is applied to address bits 4-9, so tiles start on 1024-byte boundaries.
  const std::uint32_t smem = (smem_address(smem_raw) + 1023u) & ~1023u;
  // Q, then K's stages, then V's (stage i at + i * kKvBytes).
  const std::uint32_t s_q = smem, s_k = s_q + L::kQBytes, s_v = s_k + kStages * L::kKvBytes;

  BlockWork<T> w;
  if (!plan_block<T, D, kBlockM, kBlockN>(a, w)) return;

  const int warpgroup = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int group_first = w.m0 + 64 * warpgroup;  // the warpgroup's rows: the unit a wgmma runs on
  const KeyRange group_keys = key_range(a, w.seqlen_k, w.diag, group_first, min(group_first + 63, a.seqlen_q - 1));
  const int row = group_first + 16 * warp + g;  // this thread's rows: row and row + 8
  int row_lo[2], row_hi[2];
  row_key_bounds(a, w, row, row_lo, row_hi);

  auto load_keys = [&](int n) {  // key tile n into stage (n - n_first) % kStages, as one cp.async group
    const int stage = (n - w.n_first) % kStages;
    if (n <= w.n_last) {
      load_swizzled<T, D, kBlockN, kThreads>(s_k + stage * L::kKvBytes, w.k, w.kv_stride, n * kBlockN, w.seqlen_k);
      load_swizzled<T, D, kBlockN, kThreads>(s_v + stage * L::kKvBytes, w.v, w.kv_stride, n * kBlockN, w.seqlen_k);
    }
    cp_async_commit();
  };
  // Waits for the one copy group in flight (this thread's), then makes every thread's copies visible to the
  // tensor cores: cp.async writes through the generic proxy and wgmma reads through the async one.
  auto await_keys = [] {
    cp_async_wait<0>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
  };
  // S = Q K^T over D/16 k-steps: k-step kk is 32 bytes into column block kk / 4 of both tiles. Rows 8 apart
  // are 1024 bytes apart (the stride offset); the leading offset is unused by K-major swizzled tiles.
  auto issue_scores = [&](float (&s)[kBlockN / 8][4], int n) {
    const std::uint32_t tile_k = s_k + ((n - w.n_first) % kStages) * L::kKvBytes;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const std::uint32_t q_at = s_q + (kk / 4) * kBlockM * 128 + warpgroup * 64 * 128 + (kk % 4) * 32;
      const std::uint32_t k_at = tile_k + (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
      Wgmma<T>::s(s, descriptor(q_at, 16, 1024), descriptor(k_at, 16, 1024), kk > 0);
    }
    wgmma_commit();
  };
  // O += P V over 4 k-steps of 16 keys: k-step kk starts at key 16kk (2048 bytes in); keys 8 apart are 1024
  // bytes apart (the stride offset), and V's 64-column blocks kBlockN lines apart (the leading one).
  auto issue_values = [&](float (&acc_o)[D / 8][4], const std::uint32_t (&p)[kBlockN / 16][4], int n) {
    const std::uint32_t tile_v = s_v + ((n - w.n_first) % kStages) * L::kKvBytes;
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      Wgmma<T>::pv(acc_o, p[kk], descriptor(tile_v + kk * 16 * 128, kBlockN * 128, 1024));
    wgmma_commit();
  };
  // Scores of tile n into P (packed), the running max and sum updated; `rescale` is O's factor.
  auto softmax = [&](float (&s)[kBlockN / 8][4], int n, std::uint32_t (&p)[kBlockN / 16][4], float (&rescale)[2],
                     float (&row_max)[2], float (&row_sum)[2]) {
    const int key0 = n * kBlockN;
    scale_and_mask(s, a, key0 < group_keys.all_lo || key0 + kBlockN - 1 > group_keys.all_hi, row_lo, row_hi,
                   key0 + 2 * t);
    softmax_step(s, row_max, row_sum, rescale);
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) pack_p<T>(s, kk, p[kk]);
  };

  load_swizzled<T, D, kBlockM, kThreads>(s_q, w.q, w.q_stride, w.m0, a.seqlen_q);
  load_keys(w.n_first);

  float acc_o[D / 8][4];
  zero_tiles(acc_o);
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}, rescale[2];
  std::uint32_t p[kBlockN / 16][4];  // P of the tile before the current one, waiting for its P V

  // Every key tile of the block is computed by both warpgroups (a tile one warpgroup's rows cannot see is
  // masked whole): the MMAs are warpgroup-collective and the stages block-wide. Tile n's Q K^T and tile
  // n - 1's P V are issued together, and tile n's softmax runs while P V is still on the tensor cores; O's
  // rescale for tile n waits for that P V. Three stages: while tile n + 1 is copied, tile n's K and tile
  // n - 1's V are read.
  {
    await_keys();
    load_keys(w.n_first + 1);
    float s[kBlockN / 8][4];
    fence_accumulators(s);
    wgmma_fence();
    issue_scores(s, w.n_first);
    wgmma_wait<0>();
    fence_accumulators(s);
    softmax(s, w.n_first, p, rescale, row_max, row_sum);  // O is 0: no rescale
  }
  for (int n = w.n_first + 1; n <= w.n_last; ++n) {
    await_keys();  // tile n landed; every warpgroup is past tile n - 2, whose stage the next copy takes
    load_keys(n + 1);
    float s[kBlockN / 8][4];
    fence_accumulators(s);
    fence_accumulators(acc_o);
    fence_fragments(p);
    wgmma_fence();
    issue_scores(s, n);
    issue_values(acc_o, p, n - 1);
    wgmma_wait<1>();  // the scores; P V may still run
    fence_accumulators(s);
    std::uint32_t p_next[kBlockN / 16][4];
    softmax(s, n, p_next, rescale, row_max, row_sum);
    wgmma_wait<0>();
    fence_accumulators(acc_o);
    fence_fragments(p);
    rescale_o(acc_o, rescale);
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) p[kk][e] = p_next[kk][e];
  }
  fence_accumulators(acc_o);
  fence_fragments(p);
  wgmma_fence();
  issue_values(acc_o, p, w.n_last);
  wgmma_wait<0>();
  fence_accumulators(acc_o);
  fence_fragments(p);

  store_rows<T>(a, w, row, t, acc_o, row_max, row_sum);
#else
  __trap();  // a build without sm_90a code for a compute capability 9.0 GPU: fail loudly, never write nothing
#endif
}

}  // namespace ignis::cuda::flash::sm90
