#pragma once
// DRAFT (session 33, compiled, never run): the wgmma flash forward with a producer warp. Opt-in only
// (IGNIS_FLASH_KERNEL=wgmma_ws), and only for calls without device key lengths (see below).
//
// Why: the wgmma kernel of flash_forward_sm90.cuh copies with cp.async from every thread and ends each key
// tile at a block-wide barrier, so its warpgroups move in lockstep. Here one warp of a producer warpgroup
// issues bulk tensor copies (TMA) into a ring of kStages K/V stages; each stage completes on a "full" mbarrier
// (the copy engine counts the bytes) and is handed back on an "empty" mbarrier that each consumer warpgroup
// arrives on once its P V has read the stage. The two consumer warpgroups (64 query rows each) then run
// apart: no block-wide barrier remains after the prologue. setmaxnreg moves registers from the producer
// (24 a thread) to the consumers (240).
//
// The copy engine fills keys past the tensor's rows with zeros, but not keys past a cache's device length
// (seqlens_k): those rows would reach P V (P is 0 there, but 0 x NaN is NaN), so such calls keep the other
// kernel.
//
// Tensor maps: 4-D over [batch, seqlen, heads, D] with dims (D, heads, seqlen, batch) innermost first; a box is
// 64 columns x 1 head x Rows rows x 1 sequence, 128-byte swizzled, so it lands as one of the 64-column blocks
// flash_forward_sm90.cuh's descriptors read.
#include <cuda.h>

#include "cuda/ops/flash_forward_sm90.cuh"

namespace ignis::cuda::flash::sm90 {

struct WsLayout {
  static constexpr int kConsumers = 2;                   // consumer warpgroups
  static constexpr int kThreads = (kConsumers + 1) * 128;  // and the producer warpgroup
  static constexpr int kBlockM = kConsumers * 64;
  static constexpr int kStages = 3;
};

template <int D>
struct WsSmem {
  static constexpr int kQBytes = WsLayout::kBlockM * D * 2;
  static constexpr int kKvBytes = kBlockN * D * 2;  // one K or V stage
  static constexpr int kTiles = kQBytes + 2 * WsLayout::kStages * kKvBytes;
  // Tiles (1024-aligned), then the mbarriers: Q's, and each stage's full and empty.
  static constexpr int kBarriers = 1 + 2 * WsLayout::kStages;
  static constexpr int kBytes = kTiles + kBarriers * 8 + 1024;
};

#if IGNIS_FLASH_WGMMA
__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
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
// Named barriers 1 and 2 (0 is __syncthreads') order the two consumer warpgroups' MMA issue: 256 threads, one
// warpgroup waiting and the other arriving.
template <int Id>
__device__ __forceinline__ void named_barrier_sync() {
  asm volatile("bar.sync %0, 256;\n" ::"n"(Id) : "memory");
}
template <int Id>
__device__ __forceinline__ void named_barrier_arrive() {
  asm volatile("bar.arrive %0, 256;\n" ::"n"(Id) : "memory");
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
#endif

// grid: (query tiles * splits, heads_q, batch); see plan_block. q_map: box 64 x 1 x kBlockM x 1 over q;
// k_map, v_map: box 64 x 1 x kBlockN x 1 over k and v. Compiled for sm_90a only (elsewhere it traps).
// PingPong: the consumers take turns issuing their MMAs (FlashAttention-3's schedule), so that one's softmax
// runs while the other's MMAs hold the tensor cores.
template <class T, int D, bool PingPong>
__global__ void __launch_bounds__(WsLayout::kThreads, 1)
    flash_forward_ws_kernel(const Args a, const __grid_constant__ CUtensorMap q_map,
                            const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map) {
#if IGNIS_FLASH_WGMMA
  using S = WsSmem<D>;
  constexpr int kStages = WsLayout::kStages, kBlockM = WsLayout::kBlockM;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const std::uint32_t smem = (smem_address(smem_raw) + 1023u) & ~1023u;
  const std::uint32_t s_q = smem, s_k = s_q + S::kQBytes, s_v = s_k + kStages * S::kKvBytes;
  const std::uint32_t q_full = smem + S::kTiles;
  auto full = [&](int stage) { return q_full + 8 * (1 + stage); };
  auto empty = [&](int stage) { return q_full + 8 * (1 + kStages + stage); };

  BlockWork<T> w;
  if (!plan_block<T, D, kBlockM, kBlockN>(a, w)) return;
  const int b = blockIdx.z, h = blockIdx.y, kv_h = h / a.group;
  const int tiles = w.n_last - w.n_first + 1;

  if (threadIdx.x == 0) {
    mbarrier_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full(s), 1);
      mbarrier_init(empty(s), 128 * WsLayout::kConsumers);  // every consumer thread arrives
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
    if (threadIdx.x != 0) return;
    mbarrier_expect_bytes(q_full, S::kQBytes);
    for (int c = 0; c < D / 64; ++c) tma_load(s_q + c * kBlockM * 128, &q_map, 64 * c, h, w.m0, b, q_full);
    for (int i = 0; i < tiles; ++i) {
      const int stage = i % kStages;
      if (i >= kStages) mbarrier_wait(empty(stage), ((i / kStages) & 1) ^ 1);
      mbarrier_expect_bytes(full(stage), 2 * S::kKvBytes);
      const int row = (w.n_first + i) * kBlockN;
      for (int c = 0; c < D / 64; ++c) {
        tma_load(s_k + stage * S::kKvBytes + c * kBlockN * 128, &k_map, 64 * c, kv_h, row, b, full(stage));
        tma_load(s_v + stage * S::kKvBytes + c * kBlockN * 128, &v_map, 64 * c, kv_h, row, b, full(stage));
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");

  // A consumer: warpgroup c owns rows 64c..64c+63 of the block, as in flash_forward_wgmma_kernel.
  const int consumer = warpgroup - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int group_first = w.m0 + 64 * consumer;
  const KeyRange group_keys = key_range(a, w.seqlen_k, w.diag, group_first, min(group_first + 63, a.seqlen_q - 1));
  const int row = group_first + 16 * warp + g;
  int row_lo[2], row_hi[2];
  row_key_bounds(a, w, row, row_lo, row_hi);

  auto issue_scores = [&](float (&s)[kBlockN / 8][4], int i) {
    const std::uint32_t tile_k = s_k + (i % kStages) * S::kKvBytes;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const std::uint32_t q_at = s_q + (kk / 4) * kBlockM * 128 + consumer * 64 * 128 + (kk % 4) * 32;
      const std::uint32_t k_at = tile_k + (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
      Wgmma<T>::s(s, descriptor(q_at, 16, 1024), descriptor(k_at, 16, 1024), kk > 0);
    }
    wgmma_commit();
  };
  auto issue_values = [&](float (&acc_o)[D / 8][4], const std::uint32_t (&p)[kBlockN / 16][4], int i) {
    const std::uint32_t tile_v = s_v + (i % kStages) * S::kKvBytes;
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      Wgmma<T>::pv(acc_o, p[kk], descriptor(tile_v + kk * 16 * 128, kBlockN * 128, 1024));
    wgmma_commit();
  };
  auto softmax = [&](float (&s)[kBlockN / 8][4], int i, std::uint32_t (&p)[kBlockN / 16][4], float (&rescale)[2],
                     float (&row_max)[2], float (&row_sum)[2]) {
    const int key0 = (w.n_first + i) * kBlockN;
    scale_and_mask(s, a, key0 < group_keys.all_lo || key0 + kBlockN - 1 > group_keys.all_hi, row_lo, row_hi,
                   key0 + 2 * t);
    softmax_step(s, row_max, row_sum, rescale);
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) pack_p<T>(s, kk, p[kk]);
  };
  // Hands stage i % kStages back to the producer once this thread's wait has seen the MMAs that read it
  // complete. Every consumer thread arrives: an arrive by one lane (a branch, or a predicate in the asm) makes
  // ptxas serialize the wgmma instructions (its warning C7513).
  auto release = [&](int i) {
    mbarrier_arrive(empty(i % kStages));
  };

  // Turns: consumer c waits on barrier 1 + c before issuing and then lets the other go. Each issues tiles + 1
  // times; consumer 1 opens consumer 0's first turn and skips its last hand-over, so every barrier's
  // arrivals balance.
  int turns_left = tiles + 1;
  auto begin_turn = [&] {
    if constexpr (PingPong) {
      if (consumer == 0)
        named_barrier_sync<1>();
      else
        named_barrier_sync<2>();
    }
  };
  auto end_turn = [&] {
    --turns_left;
    if constexpr (PingPong) {
      if (consumer == 0)
        named_barrier_arrive<2>();
      else if (turns_left > 0)
        named_barrier_arrive<1>();
    }
  };
  if constexpr (PingPong)
    if (consumer == 1) named_barrier_arrive<1>();

  float acc_o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[j][e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}, rescale[2];
  std::uint32_t p[kBlockN / 16][4];

  mbarrier_wait(q_full, 0);
  {
    mbarrier_wait(full(0), 0);
    float s[kBlockN / 8][4];
    fence_accumulators(s);
    wgmma_fence();
    begin_turn();
    issue_scores(s, 0);
    end_turn();
    wgmma_wait<0>();
    fence_accumulators(s);
    softmax(s, 0, p, rescale, row_max, row_sum);
  }
  for (int i = 1; i < tiles; ++i) {
    mbarrier_wait(full(i % kStages), (i / kStages) & 1);
    float s[kBlockN / 8][4];
    fence_accumulators(s);
    fence_accumulators(acc_o);
    fence_fragments(p);
    wgmma_fence();
    begin_turn();
    issue_scores(s, i);
    issue_values(acc_o, p, i - 1);
    end_turn();
    wgmma_wait<1>();
    fence_accumulators(s);
    std::uint32_t p_next[kBlockN / 16][4];
    softmax(s, i, p_next, rescale, row_max, row_sum);
    wgmma_wait<0>();
    fence_accumulators(acc_o);
    fence_fragments(p);
    release(i - 1);
    rescale_o(acc_o, rescale);
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) p[kk][e] = p_next[kk][e];
  }
  fence_accumulators(acc_o);
  fence_fragments(p);
  wgmma_fence();
  begin_turn();
  issue_values(acc_o, p, tiles - 1);
  end_turn();
  wgmma_wait<0>();
  fence_accumulators(acc_o);
  fence_fragments(p);

  store_rows<T>(a, w, row, t, acc_o, row_max, row_sum);
#else
  __trap();
#endif
}

}  // namespace ignis::cuda::flash::sm90
