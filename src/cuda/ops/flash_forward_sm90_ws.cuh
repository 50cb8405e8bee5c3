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

// The block's shape: Consumers warpgroups of 64 query rows each, BlockN keys a tile, Stages K and V tiles in
// flight, and one producer warpgroup (of which one thread issues the copies).
template <int D, int Consumers, int BlockN, int Stages>
struct WsConfig {
  static constexpr int kConsumers = Consumers, kBlockN = BlockN, kStages = Stages;
  static constexpr int kThreads = (Consumers + 1) * 128;
  static constexpr int kBlockM = Consumers * 64;
  static constexpr int kQBytes = kBlockM * D * 2;
  static constexpr int kKvBytes = BlockN * D * 2;  // one K or V stage
  static constexpr int kTiles = kQBytes + 2 * Stages * kKvBytes;
  // Tiles (1024-aligned), then the mbarriers: Q's, then each K stage's and each V stage's full and empty.
  static constexpr int kBarriers = 1 + 4 * Stages;
  static constexpr int kSmemBytes = kTiles + kBarriers * 8 + 1024;
  // Registers a thread after setmaxnreg: the producer's few go to the consumers (65536 a block, multiples of 8).
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = ((65536 - 128 * kProducerRegisters) / (128 * Consumers)) / 8 * 8;
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
// Named barriers 1.. (0 is __syncthreads') order the consumer warpgroups' MMA issue: 256 threads, one
// warpgroup waiting and the one before it arriving.
__device__ __forceinline__ void named_barrier_sync(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
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
// k_map, v_map: box 64 x 1 x BlockN x 1 over k and v. Compiled for sm_90a only (elsewhere it traps).
// PingPong: the consumers take turns issuing their MMAs (FlashAttention-3's schedule), so that one's softmax
// runs while another's MMAs hold the tensor cores.
template <class T, int D, class C, bool PingPong>
__global__ void __launch_bounds__(C::kThreads, 1)
    flash_forward_ws_kernel(const Args a, const __grid_constant__ CUtensorMap q_map,
                            const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map) {
#if IGNIS_FLASH_WGMMA
  constexpr int kStages = C::kStages, kBlockM = C::kBlockM, kBlockN = C::kBlockN, kConsumers = C::kConsumers;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const std::uint32_t smem = (smem_address(smem_raw) + 1023u) & ~1023u;
  const std::uint32_t s_q = smem, s_k = s_q + C::kQBytes, s_v = s_k + kStages * C::kKvBytes;
  const std::uint32_t q_full = smem + C::kTiles;
  // Barrier j of the stage ring: full_k, full_v, empty_k, empty_v (in that order) for each stage.
  auto ring = [&](int which, int stage) { return q_full + 8 * (1 + which * kStages + stage); };
  auto full_k = [&](int i) { return ring(0, i % kStages); };
  auto full_v = [&](int i) { return ring(1, i % kStages); };
  auto empty_k = [&](int i) { return ring(2, i % kStages); };
  auto empty_v = [&](int i) { return ring(3, i % kStages); };
  // Use u of a stage (u = i / kStages) waits for phase u of its full barrier, and refilling it for phase
  // u - 1 of its empty one.
  auto parity = [](int i) { return (i / kStages) & 1; };

  BlockWork<T> w;
  if (!plan_block<T, D, kBlockM, kBlockN>(a, w)) return;
  const int b = blockIdx.z, h = blockIdx.y, kv_h = h / a.group;
  const int tiles = w.n_last - w.n_first + 1;

  if (threadIdx.x == 0) {
    mbarrier_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(ring(0, s), 1);
      mbarrier_init(ring(1, s), 1);
      mbarrier_init(ring(2, s), 128 * kConsumers);  // every consumer thread arrives (see release)
      mbarrier_init(ring(3, s), 128 * kConsumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == kConsumers) {  // the producer: the last warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(C::kProducerRegisters));
    if (threadIdx.x != kConsumers * 128) return;
    constexpr int kTileBytes = C::kKvBytes;
    auto load = [&](std::uint32_t tile, const CUtensorMap* map, int i, std::uint32_t bar) {
      mbarrier_expect_bytes(bar, kTileBytes);
      for (int c = 0; c < D / 64; ++c)
        tma_load(tile + c * kBlockN * 128, map, 64 * c, kv_h, (w.n_first + i) * kBlockN, b, bar);
    };
    mbarrier_expect_bytes(q_full, C::kQBytes);
    for (int c = 0; c < D / 64; ++c) tma_load(s_q + c * kBlockM * 128, &q_map, 64 * c, h, w.m0, b, q_full);
    // K runs a tile ahead of V: the consumers need K of tile i + 1 before V of tile i.
    load(s_k, &k_map, 0, full_k(0));
    for (int i = 0; i < tiles; ++i) {
      if (i + 1 < tiles) {
        if (i + 1 >= kStages) mbarrier_wait(empty_k(i + 1), parity(i + 1) ^ 1);
        load(s_k + ((i + 1) % kStages) * kTileBytes, &k_map, i + 1, full_k(i + 1));
      }
      if (i >= kStages) mbarrier_wait(empty_v(i), parity(i) ^ 1);
      load(s_v + (i % kStages) * kTileBytes, &v_map, i, full_v(i));
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(C::kConsumerRegisters));

  // A consumer: warpgroup c owns rows 64c..64c+63 of the block, as in flash_forward_wgmma_kernel.
  const int consumer = warpgroup, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int group_first = w.m0 + 64 * consumer;
  const KeyRange group_keys = key_range(a, w.seqlen_k, w.diag, group_first, min(group_first + 63, a.seqlen_q - 1));
  const int row = group_first + 16 * warp + g;
  int row_lo[2], row_hi[2];
  row_key_bounds(a, w, row, row_lo, row_hi);

  auto issue_scores = [&](float (&s)[kBlockN / 8][4], int i) {
    const std::uint32_t tile_k = s_k + (i % kStages) * C::kKvBytes;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const std::uint32_t q_at = s_q + (kk / 4) * kBlockM * 128 + consumer * 64 * 128 + (kk % 4) * 32;
      const std::uint32_t k_at = tile_k + (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
      Wgmma<T>::s(s, descriptor(q_at, 16, 1024), descriptor(k_at, 16, 1024), kk > 0);
    }
    wgmma_commit();
  };
  auto issue_values = [&](float (&acc_o)[D / 8][4], const std::uint32_t (&p)[kBlockN / 16][4], int i) {
    const std::uint32_t tile_v = s_v + (i % kStages) * C::kKvBytes;
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      Wgmma<T>::pv(acc_o, p[kk], descriptor(tile_v + kk * 16 * 128, kBlockN * 128, 1024));
    wgmma_commit();
  };
  // Scores of tile i into probabilities (in place), the running max and sum updated; `rescale` is O's factor
  // before tile i's P V is added.
  auto softmax = [&](float (&s)[kBlockN / 8][4], int i, float (&rescale)[2], float (&row_max)[2],
                     float (&row_sum)[2]) {
    const int key0 = (w.n_first + i) * kBlockN;
    scale_and_mask(s, a, key0 < group_keys.all_lo || key0 + kBlockN - 1 > group_keys.all_hi, row_lo, row_hi,
                   key0 + 2 * t);
    softmax_step(s, row_max, row_sum, rescale);
  };
  auto pack = [&](const float (&s)[kBlockN / 8][4], std::uint32_t (&p)[kBlockN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) pack_p<T>(s, kk, p[kk]);
  };
  // Hands a stage back once this thread's wait has seen the MMAs that read it complete. Every consumer thread
  // arrives: an arrive by one lane (a branch, or a predicate in the asm) makes ptxas serialize the wgmma
  // instructions (its warning C7513).
  auto release = [&](std::uint32_t bar) { mbarrier_arrive(bar); };

  // Turns: consumer c waits on named barrier 1 + c before issuing and then opens the next consumer's turn.
  // Each issues tiles + 1 times; the last consumer opens consumer 0's first turn and skips its own last
  // hand-over, so every barrier's arrivals balance.
  int turns_left = tiles + 1;
  auto begin_turn = [&] {
    if constexpr (PingPong) named_barrier_sync(1 + consumer);
  };
  auto end_turn = [&] {
    --turns_left;
    if constexpr (PingPong)
      if (consumer != kConsumers - 1 || turns_left > 0) named_barrier_arrive(1 + (consumer + 1) % kConsumers);
  };
  if constexpr (PingPong)
    if (consumer == kConsumers - 1) named_barrier_arrive(1);

  float acc_o[D / 8][4];
  zero_tiles(acc_o);
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}, rescale[2];
  float s[kBlockN / 8][4];
  std::uint32_t p[kBlockN / 16][4];  // P of the tile before the current one, waiting for its P V

  // Tile i's Q K^T and tile i - 1's P V are issued in one turn; tile i's softmax runs while P V is on the
  // tensor cores, and P is packed once P V has read the previous one. O is rescaled for tile i - 1 just
  // before its P V (after tile i's Q K^T is issued, so the rescale runs under it).
  mbarrier_wait(q_full, 0);
  mbarrier_wait(full_k(0), 0);
  fence_accumulators(s);
  wgmma_fence();
  begin_turn();
  issue_scores(s, 0);
  end_turn();
  wgmma_wait<0>();
  fence_accumulators(s);
  release(empty_k(0));
  softmax(s, 0, rescale, row_max, row_sum);  // O is 0: no rescale
  pack(s, p);
  for (int i = 1; i < tiles; ++i) {
    mbarrier_wait(full_k(i), parity(i));
    fence_accumulators(s);
    fence_fragments(p);
    wgmma_fence();
    begin_turn();
    issue_scores(s, i);
    fence_accumulators(acc_o);
    rescale_o(acc_o, rescale);
    mbarrier_wait(full_v(i - 1), parity(i - 1));
    fence_accumulators(acc_o);
    wgmma_fence();
    issue_values(acc_o, p, i - 1);
    end_turn();
    wgmma_wait<1>();  // the scores; P V may still run
    fence_accumulators(s);
    release(empty_k(i));
    softmax(s, i, rescale, row_max, row_sum);
    wgmma_wait<0>();
    fence_accumulators(acc_o);
    fence_fragments(p);
    release(empty_v(i - 1));
    pack(s, p);
  }
  rescale_o(acc_o, rescale);
  mbarrier_wait(full_v(tiles - 1), parity(tiles - 1));
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
