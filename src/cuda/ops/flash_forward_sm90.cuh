#pragma once
// Flash attention forward on Hopper (sm_90a): the kernel flash_attention.cu launches on compute capability 9.0.
// FlashAttention-3's structure, written for this project: warp specialization, bulk tensor copies (TMA),
// mbarrier stage rings and ping-pong between the MMA warpgroups. See docs/PERF_NOTES.md "# Session 35".
//
// The kernel is persistent: each resident block takes units of 64 * kConsumers query rows of one (query head,
// sequence) in turn and walks their key tiles of kBlockN:
// - The producer warpgroup (the last; one of its threads works) copies each unit's Q into one of two buffers,
//   then each key tile's K and V into rings of kStages stages, running ahead into the next unit. A stage
//   completes on its "full" mbarrier (the copy engine counts the bytes) and is handed back on its "empty" one,
//   which every consumer thread arrives on once the MMAs that read it have completed. K runs a tile ahead of V,
//   which the consumers need later.
// - Each consumer warpgroup owns 64 rows, in the C layout of flash_kernel_common.cuh (warp i rows 16i..16i+15).
//   Per tile: S = Q K^T as one chain of wgmma m64 x kBlockN from shared memory, the online softmax on S's
//   registers, and O += P V as one chain of wgmma m64nD with P from registers. Tile i's Q K^T and tile i-1's P V
//   are issued in one turn, so tile i's softmax runs while P V is on the tensor cores; and the consumers take
//   turns (named barriers, round robin), so that one's softmax runs while another's MMAs hold the tensor cores.
// - No block-wide barrier after the prologue: the warpgroups drift apart. setmaxnreg moves the producer's
//   registers to the consumers.
//
// The copy engine fills rows past a tensor's end with zeros: queries past seqlen_q and keys past the cache's
// capacity. Keys between a sequence's device length (seqlens_k) and the capacity hold stale values; P is 0
// there but 0 x NaN is NaN, so the consumers zero those rows of the last V tile before its P V.
//
// Tensor maps: 4-D over [batch, seqlen, heads, D] with dims (D, heads, seqlen, batch) innermost first; a box is
// 64 columns x 1 head x rows x 1 sequence, 128-byte swizzled, so it lands as one 64-column block of the tiles
// flash_wgmma.cuh describes.
#include <cuda.h>

#include "cuda/ops/flash_wgmma.cuh"

namespace ignis::cuda::flash::sm90 {

// A block's shape: Consumers warpgroups of 64 query rows, BlockN keys a tile, Stages K and V tiles in flight,
// two Q buffers (the next unit's Q is copied while this one's runs), and the producer warpgroup.
template <int D, int Consumers, int BlockN, int Stages>
struct ForwardShape {
  static constexpr int kD = D, kConsumers = Consumers, kBlockN = BlockN, kStages = Stages;
  static constexpr int kThreads = (Consumers + 1) * 128;
  static constexpr int kBlockM = Consumers * 64;
  static constexpr int kQBytes = kBlockM * D * 2;  // one Q buffer
  static constexpr int kKvBytes = BlockN * D * 2;  // one K or V stage
  static constexpr int kTiles = 2 * kQBytes + 2 * Stages * kKvBytes;
  // Tiles (1024-aligned), then the mbarriers: each Q buffer's full and empty, then each stage's full K, full V,
  // empty K and empty V; then each Q buffer's unit index.
  static constexpr int kBarriers = 4 + 4 * Stages;
  static constexpr int kSmemBytes = kTiles + kBarriers * 8 + 2 * 4 + 1024;
  // Registers a thread after setmaxnreg (ptxas compiles each side for its count; the pool: flash_wgmma.cuh's
  // register_pool): the producer keeps 32 with three consumers (they take 160; 152 spill) and 40 with two (they
  // take 232); 24 spill the producer's unit loop.
  static constexpr int kProducerRegisters = Consumers == 3 ? 32 : 40;
  static constexpr int kConsumerRegisters = consumer_registers(Consumers, kProducerRegisters);
  static_assert(128 * (kProducerRegisters + Consumers * kConsumerRegisters) <= register_pool(Consumers));
};

// Unit `unit` of the work list, in the order of the non-persistent grid: query tiles innermost (the longest
// first, see plan_work), then heads, then sequences. Blocks running at once then mostly share a head's K and V
// in L2 (units taken head-major instead read 132 heads' K and V at once from memory: -10% at D 128).
__device__ __forceinline__ WorkCoords unit_coords(const Args& a, int unit, int tiles_x) {
  const int head_unit = unit / tiles_x;
  return {unit % tiles_x, head_unit % a.heads_q, head_unit / a.heads_q, tiles_x, a.batch};
}

// Persistent: grid (the resident blocks or fewer) over the (query tiles * splits) x heads_q x batch units; `units`
// is that count and tiles_x the first factor. Block i takes unit i first, then the next from a.unit_counter
// (zeroed before the launch: the blocks that finish first take more, as the hardware's block scheduler would
// hand them out), or without a counter units i + gridDim.x, i + 2 gridDim.x, ...
// q_map: box 64 x 1 x kBlockM x 1 over q; k_map, v_map: box 64 x 1 x kBlockN x 1 over k and v. Compiled for
// sm_90a only (elsewhere it traps).
template <class T, class Shape>
__global__ void __launch_bounds__(Shape::kThreads, 1)
    flash_forward_sm90_kernel(const Args a, int units, int tiles_x, const __grid_constant__ CUtensorMap q_map,
                              const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map) {
#if IGNIS_FLASH_WGMMA
  using C = Shape;
  constexpr int D = Shape::kD;
  constexpr int kStages = C::kStages, kBlockM = C::kBlockM, kBlockN = C::kBlockN, kConsumers = C::kConsumers;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const std::uint32_t smem = (smem_address(smem_raw) + 1023u) & ~1023u;
  const std::uint32_t s_q = smem, s_k = s_q + 2 * C::kQBytes, s_v = s_k + kStages * C::kKvBytes;
  const std::uint32_t bars = smem + C::kTiles;
  // Counters run over the block's units: Q use u takes buffer u % 2, and key tile j (counted over all units)
  // takes stage j % kStages. Use n of a buffer or stage waits for phase n of its full barrier, and its refill for
  // phase n - 1 of its empty one.
  auto q_full = [&](int u) { return bars + 8 * (u % 2); };
  auto q_empty = [&](int u) { return bars + 8 * (2 + u % 2); };
  auto ring = [&](int which, int j) { return bars + 8 * (4 + which * kStages + j % kStages); };
  auto full_k = [&](int j) { return ring(0, j); };
  auto full_v = [&](int j) { return ring(1, j); };
  auto empty_k = [&](int j) { return ring(2, j); };
  auto empty_v = [&](int j) { return ring(3, j); };
  auto unit_slot = [&](int u) { return bars + 8 * C::kBarriers + 4 * (u % 2); };
  auto q_parity = [](int u) { return (u / 2) & 1; };
  auto parity = [](int j) { return (j / kStages) & 1; };

  if (threadIdx.x == 0) {
    for (int q = 0; q < 2; ++q) {
      mbarrier_init(q_full(q), 1);
      mbarrier_init(q_empty(q), 128 * kConsumers);
    }
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full_k(s), 1);
      mbarrier_init(full_v(s), 1);
      mbarrier_init(empty_k(s), 128 * kConsumers);  // every consumer thread arrives (see release)
      mbarrier_init(empty_v(s), 128 * kConsumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == kConsumers) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(C::kProducerRegisters));
    if (threadIdx.x != kConsumers * 128) return;
    // Each unit passes through a Q buffer: its index is written beside the buffer before the buffer's full
    // barrier completes (the arrive releases it to the consumers' wait), with -1 after the last. A unit
    // without work gets no copies: its barrier completes on the arrive alone, and the consumers write its rows.
    int q_uses = 0, j0 = 0;  // Q buffers filled, key tiles copied
    for (int unit = blockIdx.x;; ++q_uses) {
      if (q_uses >= 2) mbarrier_wait(q_empty(q_uses), q_parity(q_uses) ^ 1);
      const bool done = unit >= units;
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(unit_slot(q_uses)), "r"(done ? -1 : unit) : "memory");
      if (done) {
        mbarrier_arrive(q_full(q_uses));
        break;
      }
      const WorkCoords c = unit_coords(a, unit, tiles_x);
      // The next unit is taken once this one's copies are issued, a few tiles before its end, so that the
      // blocks that finish first take it.
      auto take_next = [&] {
        unit = a.unit_counter ? atomicAdd(a.unit_counter, 1) + static_cast<int>(gridDim.x) : unit + gridDim.x;
      };
      BlockWork<T> w;
      if (!plan_work<T, D, kBlockM, kBlockN>(a, c, w)) {
        mbarrier_arrive(q_full(q_uses));
        take_next();
        continue;
      }
      const int kv_h = c.h / a.group, tiles = w.n_last - w.n_first + 1;
      auto load = [&](std::uint32_t tile, const CUtensorMap* map, int i, std::uint32_t bar) {
        mbarrier_expect_bytes(bar, C::kKvBytes);
        for (int col = 0; col < D / 64; ++col)
          tma_load(tile + col * kBlockN * 128, map, 64 * col, kv_h, (w.n_first + i) * kBlockN, c.b, bar);
      };
      mbarrier_expect_bytes(q_full(q_uses), C::kQBytes);
      for (int col = 0; col < D / 64; ++col)
        tma_load(s_q + (q_uses % 2) * C::kQBytes + col * kBlockM * 128, &q_map, 64 * col, c.h, w.m0, c.b,
                 q_full(q_uses));
      // K runs a tile ahead of V: the consumers need K of tile i + 1 before V of tile i.
      if (j0 >= kStages) mbarrier_wait(empty_k(j0), parity(j0) ^ 1);
      load(s_k + (j0 % kStages) * C::kKvBytes, &k_map, 0, full_k(j0));
      for (int i = 0; i < tiles; ++i) {
        const int j = j0 + i;
        if (i + 1 < tiles) {
          if (j + 1 >= kStages) mbarrier_wait(empty_k(j + 1), parity(j + 1) ^ 1);
          load(s_k + ((j + 1) % kStages) * C::kKvBytes, &k_map, i + 1, full_k(j + 1));
        }
        if (j >= kStages) mbarrier_wait(empty_v(j), parity(j) ^ 1);
        load(s_v + (j % kStages) * C::kKvBytes, &v_map, i, full_v(j));
      }
      j0 += tiles;
      take_next();
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(C::kConsumerRegisters));

  const int consumer = warpgroup, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  // Hands a buffer or stage back once this thread's wait has seen the MMAs that read it complete. Every
  // consumer thread arrives: an arrive by one lane (a branch, or a predicate in the asm) makes ptxas serialize
  // the wgmma instructions (its warning C7513).
  auto release = [](std::uint32_t bar) { mbarrier_arrive(bar); };

  for (int q_uses = 0, j0 = 0;; ++q_uses) {
    mbarrier_wait(q_full(q_uses), q_parity(q_uses));
    int unit;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(unit) : "r"(unit_slot(q_uses)) : "memory");
    if (unit < 0) break;
    const WorkCoords c = unit_coords(a, unit, tiles_x);
    BlockWork<T> w;
    if (!plan_work<T, D, kBlockM, kBlockN>(a, c, w)) {
      write_no_keys<T, D, kBlockM>(a, w, threadIdx.x, 128 * kConsumers);
      release(q_empty(q_uses));
      continue;
    }
    const int tiles = w.n_last - w.n_first + 1;
    const int group_first = w.m0 + 64 * consumer;
    const KeyRange group_keys =
        key_range(a, w.seqlen_k, w.diag, group_first, min(group_first + 63, a.seqlen_q - 1));
    const int row = group_first + 16 * warp + g;  // this thread's rows: row and row + 8
    int row_lo[2], row_hi[2];
    row_key_bounds(a, w, row, row_lo, row_hi);
    const std::uint32_t tile_q = s_q + (q_uses % 2) * C::kQBytes;

    // S = Q K^T over D/16 k-steps: k-step kk is 32 bytes into column block kk / 4 of both tiles. Rows 8 apart
    // are 1024 bytes apart (the stride offset); the leading offset is unused by K-major swizzled tiles.
    auto issue_scores = [&](float (&s)[kBlockN / 8][4], int j) {
      const std::uint32_t tile_k = s_k + (j % kStages) * C::kKvBytes;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const std::uint32_t q_at = tile_q + (kk / 4) * kBlockM * 128 + consumer * 64 * 128 + (kk % 4) * 32;
        const std::uint32_t k_at = tile_k + (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
        Wgmma<T>::s(s, descriptor(q_at, 16, 1024), descriptor(k_at, 16, 1024), kk > 0);
      }
      wgmma_commit();
    };
    // O += P V over kBlockN/16 k-steps of 16 keys: k-step kk starts at key 16kk (2048 bytes in); keys 8 apart
    // are 1024 bytes apart (the stride offset), and V's 64-column blocks kBlockN lines apart (the leading one).
    auto issue_values = [&](float (&acc_o)[D / 8][4], const std::uint32_t (&p)[kBlockN / 16][4], int j) {
      const std::uint32_t tile_v = s_v + (j % kStages) * C::kKvBytes;
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk)
        Wgmma<T>::pv(acc_o, p[kk], descriptor(tile_v + kk * 16 * 128, kBlockN * 128, 1024));
      wgmma_commit();
    };
    // Scores of tile i into probabilities in place, the running max and sum updated; `rescale` is O's factor
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

    // Turns: consumer c waits on named barrier 1 + c before issuing and then opens the next consumer's turn.
    // Each issues tiles + 1 times a unit; the last consumer opens consumer 0's first turn and skips its own
    // last hand-over, so every barrier's arrivals balance within the unit.
    int turns_left = tiles + 1;
    auto begin_turn = [&] { named_barrier_sync(1 + consumer, 256); };
    auto end_turn = [&] {
      --turns_left;
      if (consumer != kConsumers - 1 || turns_left > 0) named_barrier_arrive(1 + (consumer + 1) % kConsumers, 256);
    };
    if (consumer == kConsumers - 1) named_barrier_arrive(1, 256);

    // Keys between the sequence's length and the cache's capacity in the last tile: their V rows are zeroed
    // (by all consumers, then a barrier among them) before the tile's P V.
    auto zero_stale_values = [&] {
      const int key0 = w.n_last * kBlockN, first = w.seqlen_k - key0, last = min(kBlockN, a.seqlen_k - key0);
      if (first >= last) return;  // uniform over the consumers
      const std::uint32_t tile_v = s_v + ((j0 + tiles - 1) % kStages) * C::kKvBytes;
      constexpr int kChunks = D / 64 * 8;  // 16-byte chunks of a key's row over its column blocks
      for (int chunk = threadIdx.x; chunk < (last - first) * kChunks; chunk += 128 * kConsumers) {
        const int key = first + chunk / kChunks, block = (chunk % kChunks) / 8;
        asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(
                         tile_v + block * kBlockN * 128 + key * 128 + (chunk % 8) * 16),
                     "r"(0)
                     : "memory");
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes, read by the MMA
      named_barrier_sync(kConsumers + 1, 128 * kConsumers);
    };

    float acc_o[D / 8][4];
    zero_tiles(acc_o);
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}, rescale[2];
    float s[kBlockN / 8][4];
    std::uint32_t p[kBlockN / 16][4];  // P of the tile before the current one, waiting for its P V

    // Tile i's Q K^T and tile i - 1's P V are issued in one turn; tile i's softmax runs while P V is on the
    // tensor cores, and tile i's P is packed once P V has read tile i - 1's. O is rescaled for tile i - 1 just
    // before its P V, while tile i's Q K^T runs.
    mbarrier_wait(full_k(j0), parity(j0));
    fence_accumulators(s);
    wgmma_fence();
    begin_turn();
    issue_scores(s, j0);
    end_turn();
    wgmma_wait<0>();
    fence_accumulators(s);
    release(empty_k(j0));
    softmax(s, 0, rescale, row_max, row_sum);  // O is 0: no rescale
    pack(s, p);
    for (int i = 1; i < tiles; ++i) {
      const int j = j0 + i;
      mbarrier_wait(full_k(j), parity(j));
      fence_accumulators(s);
      fence_fragments(p);
      wgmma_fence();
      begin_turn();
      issue_scores(s, j);
      fence_accumulators(acc_o);
      rescale_o(acc_o, rescale);
      mbarrier_wait(full_v(j - 1), parity(j - 1));
      fence_accumulators(acc_o);
      wgmma_fence();
      issue_values(acc_o, p, j - 1);
      end_turn();
      wgmma_wait<1>();  // the scores; P V may still run
      fence_accumulators(s);
      release(empty_k(j));
      softmax(s, i, rescale, row_max, row_sum);
      wgmma_wait<0>();
      fence_accumulators(acc_o);
      fence_fragments(p);
      release(empty_v(j - 1));
      pack(s, p);
    }
    release(q_empty(q_uses));  // every Q K^T of the unit has completed
    const int j_last = j0 + tiles - 1;
    rescale_o(acc_o, rescale);
    mbarrier_wait(full_v(j_last), parity(j_last));
    if (a.seqlens_k) zero_stale_values();
    fence_accumulators(acc_o);
    fence_fragments(p);
    wgmma_fence();
    begin_turn();
    issue_values(acc_o, p, j_last);
    end_turn();
    wgmma_wait<0>();
    fence_accumulators(acc_o);
    fence_fragments(p);
    release(empty_v(j_last));
    j0 += tiles;

    store_rows<T>(a, w, row, t, acc_o, row_max, row_sum);
  }
#else
  __trap();  // a build without sm_90a code for a compute capability 9.0 GPU: fail loudly, never write nothing
#endif
}

}  // namespace ignis::cuda::flash::sm90
