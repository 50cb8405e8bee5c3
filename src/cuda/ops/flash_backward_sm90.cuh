#pragma once
// Flash attention backward on Hopper's warpgroup MMA (wgmma, sm_90a): the main kernel flash_backward.cu launches
// on compute capability 9.0 (its prepare and finish kernels are the same on every GPU).
//
// One block per (128 keys, kv head, sequence): two consumer warpgroups and a producer warpgroup (one warp works).
// Consumer w owns keys 64w..64w+63, and within it warp i keys 16i..16i+15, in the C layout of
// flash_kernel_common.cuh. The block walks 64-query steps as the mma.sync kernel does (flash_backward_common.cuh).
// - The producer copies each step's Q and dout with TMA into a ring of kStages stages, and its lse and delta with
//   plain loads (a step's 64 floats of a row need not be 16-byte aligned, which a bulk copy requires). A stage
//   completes on its "full" mbarrier and is handed back on its "empty" one, which every consumer thread arrives on
//   once the MMAs that read it have completed. K and V come once by TMA. So the consumers' loop holds no copies:
//   session 34's kernel, which copied the next step with cp.async from every thread behind two block barriers a
//   step, left the tensor cores idle at each step's start (PERF_NOTES "# Session 37": this one is 1.10-1.22x
//   faster).
// - Per step and consumer, all from 128-byte-swizzled shared tiles (flash_wgmma.cuh's layout):
//     S^T = K Q^T and dP^T = V dout^T: wgmma m64n64k16 chains with both operands K-major, as the forward's S;
//     P^T and dS^T from their registers (probs_and_grads);
//     dV += P^T dout and dK += dS^T Q: wgmma m64nDk16 with A from registers and B MN-major, as the forward's P V;
//     dS^T to shared memory; once both consumers' rows are there (one named barrier, no block barrier), dQ = dS K
//     over the block's 128 keys, each consumer computing half of dQ's columns with A = dS^T read transposed
//     (MN-major) and B = K MN-major, then added into the fp32 accumulator through a shared tile by one bulk
//     reduce-add (TMA) a 32-column box.
// - dS^T has two buffers, so a step's stores cannot overwrite rows the other consumer's dQ MMA of the step before
//   still reads (it passed this step's barrier only after that MMA's wait).
// - setmaxnreg gives the consumers 240 registers and the producer 24.
#include <cuda.h>

#include <cstdint>

#include "cuda/ops/flash_backward_common.cuh"
#include "cuda/ops/flash_wgmma.cuh"

namespace ignis::cuda::flash::sm90 {

template <int D>
struct BackwardLayout {
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = (kConsumers + 1) * 128;
  static constexpr int kBlockN = kConsumers * 64;        // keys a block
  static constexpr int kStepM = 64;                      // queries a step
  static constexpr int kStages = 2;                      // steps of Q, dout, lse and delta in flight
  static constexpr int kKvBytes = kBlockN * D * 2;       // K or V: D/64 column blocks of kBlockN lines
  static constexpr int kStepBytes = kStepM * D * 2;      // Q or dout of a step
  static constexpr int kDsBytes = kBlockN * kStepM * 2;  // one dS^T buffer
  static constexpr int kDqBytes = kStepM * (D / 2) * 4;  // a consumer's dQ of a step (fp32)
  static constexpr int kStatsBytes = 2 * kStepM * 4;     // a stage's lse, then its delta
  // K, V, each stage's Q then dout, two dS^T buffers, each consumer's dQ (1024-aligned tiles); each stage's stats;
  // the mbarriers: K and V's, then each stage's full and empty.
  static constexpr int kTiles = 2 * kKvBytes + kStages * 2 * kStepBytes + 2 * kDsBytes + kConsumers * kDqBytes;
  static constexpr int kBarriers = 1 + 2 * kStages;
  static constexpr int kSmemBytes = kTiles + kStages * kStatsBytes + kBarriers * 8 + 1024;
  // Registers a thread after setmaxnreg, within the block's pool of 64512 (flash_wgmma.cuh's register_pool).
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = consumer_registers(kConsumers, kProducerRegisters);
  static_assert(128 * (kProducerRegisters + kConsumers * kConsumerRegisters) <= register_pool(kConsumers));
};

// grid: (key blocks of 128, heads_kv, batch). q_map, dout_map: box 64 x 1 x kStepM x 1 over q and dout; k_map,
// v_map: box 64 x 1 x kBlockN x 1 over k and v (flash_launch_common.cuh's tensor_map); dq_map: box 32 x 1 x kStepM
// x 1 over a.dq_accum (fp32 [batch, seqlen_q, heads_q, D]). Compiled for sm_90a only.
template <class T, int D>
__global__ void __launch_bounds__(BackwardLayout<D>::kThreads, 1)
    flash_backward_wgmma_kernel(const BackwardArgs a, const __grid_constant__ CUtensorMap q_map,
                                const __grid_constant__ CUtensorMap dout_map, const __grid_constant__ CUtensorMap k_map,
                                const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap dq_map) {
#if IGNIS_FLASH_WGMMA
  using L = BackwardLayout<D>;
  constexpr int kBlockN = L::kBlockN, kStepM = L::kStepM, kStages = L::kStages, kConsumers = L::kConsumers;
  constexpr int kDqTiles = D / 16;  // dQ columns a warpgroup computes (D / 2), in tiles of 8
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The swizzle is applied to address bits 4-9, so tiles start on 1024-byte boundaries.
  const std::uint32_t smem = (smem_address(smem_raw) + 1023u) & ~1023u;
  const std::uint32_t s_k = smem, s_v = s_k + L::kKvBytes;
  const std::uint32_t s_steps = s_v + L::kKvBytes;  // stage i: Q at + 2i kStepBytes, dout at + (2i + 1) kStepBytes
  const std::uint32_t s_ds = s_steps + kStages * 2 * L::kStepBytes;  // buffer i at + i kDsBytes
  const std::uint32_t s_dq = s_ds + 2 * L::kDsBytes;                 // consumer w's at + w kDqBytes
  const std::uint32_t s_stats = smem + L::kTiles;                    // stage i at + i kStatsBytes
  const std::uint32_t bars = s_stats + kStages * L::kStatsBytes;
  float* const stats = reinterpret_cast<float*>(smem_raw + (s_stats - smem_address(smem_raw)));
  const std::uint32_t kv_full = bars;
  auto full = [&](int step) { return bars + 8 * (1 + step % kStages); };
  auto empty = [&](int step) { return bars + 8 * (1 + kStages + step % kStages); };
  auto parity = [](int step) { return (step / kStages) & 1; };
  auto tile_q = [&](int step) { return s_steps + (step % kStages) * 2 * L::kStepBytes; };
  auto tile_dout = [&](int step) { return tile_q(step) + L::kStepBytes; };

  const int n0 = blockIdx.x * kBlockN, kv_head = blockIdx.y, b = blockIdx.z;
  if (threadIdx.x == 0) {
    mbarrier_init(kv_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full(s), 32);  // every lane of the producer warp arrives (see its stats stores)
      mbarrier_init(empty(s), 128 * kConsumers);  // every consumer thread arrives (see release)
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  QuerySteps<kBlockN, kStepM> plan;
  const bool any = plan.plan(a, n0, kv_head);  // uniform over the block
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == kConsumers) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(L::kProducerRegisters));
    if (threadIdx.x >= kConsumers * 128 + 32 || !any) return;
    const int lane = threadIdx.x % 32;
    if (lane == 0) {
      mbarrier_expect_bytes(kv_full, 2 * L::kKvBytes);
      for (int col = 0; col < D / 64; ++col) {
        tma_load(s_k + col * kBlockN * 128, &k_map, 64 * col, kv_head, n0, b, kv_full);
        tma_load(s_v + col * kBlockN * 128, &v_map, 64 * col, kv_head, n0, b, kv_full);
      }
    }
    for (int step = 0; step < plan.steps; ++step) {
      const int h = plan.head(step), m0 = plan.m0(step);
      // lse and delta of the step's rows (0 past seqlen_q: those queries' scores are masked, their dout rows 0),
      // read before the stage is free so the loads' latency runs under the wait.
      constexpr int kPerLane = kStepM / 32;
      float lse[kPerLane], delta[kPerLane];
      const long long row0 = (static_cast<long long>(b) * a.heads_q + h) * a.seqlen_q + m0;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int r = lane + 32 * i;
        const bool valid = m0 + r < a.seqlen_q;
        lse[i] = valid ? a.lse[row0 + r] : 0.0f;
        delta[i] = valid ? a.delta[row0 + r] : 0.0f;
      }
      if (step >= kStages) mbarrier_wait(empty(step), parity(step) ^ 1);
      float* const step_stats = stats + (step % kStages) * 2 * kStepM;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        step_stats[lane + 32 * i] = lse[i];
        step_stats[kStepM + lane + 32 * i] = delta[i];
      }
      // Each lane's arrive releases its own stores to the consumers' wait. (A __syncwarp and lane 0's arrive alone
      // order them too, but racecheck does not follow that chain: it reported a race on every case.)
      if (lane == 0) {
        mbarrier_expect_bytes(full(step), 2 * L::kStepBytes);
        for (int col = 0; col < D / 64; ++col) {
          tma_load(tile_q(step) + col * kStepM * 128, &q_map, 64 * col, h, m0, b, full(step));
          tma_load(tile_dout(step) + col * kStepM * 128, &dout_map, 64 * col, h, m0, b, full(step));
        }
      } else {
        mbarrier_arrive(full(step));
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(L::kConsumerRegisters));

  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const long long kv_stride = static_cast<long long>(a.heads_kv) * D;
  const long long kv_head0 = (static_cast<long long>(b) * a.seqlen_k * a.heads_kv + kv_head) * D;
  T* const dk = static_cast<T*>(a.dk) + kv_head0;
  T* const dv = static_cast<T*>(a.dv) + kv_head0;
  const int row0 = n0 + 64 * warpgroup + 16 * warp;  // this warp's first key

  float acc_dk[D / 8][4], acc_dv[D / 8][4];
  zero_tiles(acc_dk);
  zero_tiles(acc_dv);
  if (!any) {  // no query sees these keys: their gradients are zero
    store_key_rows<T, D>(dk, kv_stride, row0, a.seqlen_k, g, t, acc_dk);
    store_key_rows<T, D>(dv, kv_stride, row0, a.seqlen_k, g, t, acc_dv);
    return;
  }
  int key_lo[2], key_hi[2];  // the queries that see this lane's keys row0 + g and row0 + g + 8
#pragma unroll
  for (int r = 0; r < 2; ++r) queries_of_key(a, row0 + g + 8 * r, key_lo[r], key_hi[r]);
  // Hands a stage back once this thread's wait has seen the MMAs that read it complete. Every consumer thread
  // arrives: one lane's arrive makes ptxas serialize the wgmma instructions (C7513; PERF_NOTES "# Session 35").
  auto release = [](std::uint32_t bar) { mbarrier_arrive(bar); };

  const bool dq_issuer = threadIdx.x % 128 == 0;
  mbarrier_wait(kv_full, 0);
  for (int step = 0; step < plan.steps; ++step) {
    const int m0 = plan.m0(step);
    const std::uint32_t q_tile = tile_q(step), dout_tile = tile_dout(step), ds_tile = s_ds + (step % 2) * L::kDsBytes;
    mbarrier_wait(full(step), parity(step));

    // S^T = K Q^T and dP^T = V dout^T over D/16 k-steps: k-step kk is 32 bytes into column block kk / 4; the
    // consumer's 64 key rows start 64 lines into each of K's column blocks.
    float s[kStepM / 8][4], dp[kStepM / 8][4];
    fence_accumulators(s);
    fence_accumulators(dp);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const std::uint32_t kv_at = (kk / 4) * kBlockN * 128 + warpgroup * 64 * 128 + (kk % 4) * 32;
      const std::uint32_t q_at = (kk / 4) * kStepM * 128 + (kk % 4) * 32;
      Wgmma<T>::s(s, descriptor(s_k + kv_at, 16, 1024), descriptor(q_tile + q_at, 16, 1024), kk > 0);
      Wgmma<T>::s(dp, descriptor(s_v + kv_at, 16, 1024), descriptor(dout_tile + q_at, 16, 1024), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(s);
    fence_accumulators(dp);

    const float* const lse = stats + (step % kStages) * 2 * kStepM;
    probs_and_grads(s, dp, a, lse, lse + kStepM, m0, t, key_lo, key_hi);
    std::uint32_t p[kStepM / 16][4], ds[kStepM / 16][4];
#pragma unroll
    for (int kk = 0; kk < kStepM / 16; ++kk) {
      pack_p<T>(s, kk, p[kk]);
      pack_p<T>(dp, kk, ds[kk]);
    }
#pragma unroll
    for (int kk = 0; kk < kStepM / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = row0 - n0 + g + 8 * (e & 1), query = 16 * kk + 8 * (e / 2);
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(ds_tile + swizzled(kBlockN, key, query) + 4 * t),
                     "r"(ds[kk][e])
                     : "memory");
      }

    // dV += P^T dout and dK += dS^T Q.
    fence_accumulators(acc_dv);
    fence_accumulators(acc_dk);
    fence_fragments(p);
    fence_fragments(ds);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kStepM / 16; ++kk) {
      Wgmma<T>::pv(acc_dv, p[kk], descriptor(dout_tile + kk * 16 * 128, kStepM * 128, 1024));
      Wgmma<T>::pv(acc_dk, ds[kk], descriptor(q_tile + kk * 16 * 128, kStepM * 128, 1024));
    }
    wgmma_commit();

    // dQ = dS K over the block's keys once both consumers' dS^T rows are in shared memory (st.shared writes
    // through the generic proxy, wgmma reads through the async one).
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    if (dq_issuer) bulk_wait_sources_read();  // the step before's dQ reduce has read this consumer's dQ tile
    named_barrier_sync(1, 128 * kConsumers);
    float acc_dq[kDqTiles][4];
    fence_accumulators(acc_dq);
    wgmma_fence();
    const std::uint32_t k_cols = D == 128 ? warpgroup * kBlockN * 128 : warpgroup * 64;
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      WgmmaTransposed<T>::mma(acc_dq, descriptor(ds_tile + kk * 16 * 128, kBlockN * 128, 1024),
                              descriptor(s_k + k_cols + kk * 16 * 128, kBlockN * 128, 1024), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(acc_dq);
    fence_accumulators(acc_dv);
    fence_accumulators(acc_dk);
    fence_fragments(p);
    fence_fragments(ds);
    release(empty(step));  // Q and dout of this step are read

    // dQ through shared memory, then one bulk reduce-add a 32-column box by one thread (L2 adds whole lines; rows
    // past seqlen_q are skipped) instead of D / 4 scattered float2 atomics a thread. The tile is 128-byte swizzled,
    // so the 8 rows one store instruction spans land on distinct banks.
    const std::uint32_t dq_tile = s_dq + warpgroup * L::kDqBytes;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r;
#pragma unroll
      for (int c = 0; c < kDqTiles; ++c) {
        const int col = 8 * c + 2 * t;  // of this consumer's D / 2
        const std::uint32_t at = dq_tile + (col / 32) * kStepM * 128 + row * 128 +
                                 ((((col % 32) / 4) ^ (row % 8)) << 4) + (col % 4) * 4;
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(acc_dq[c][2 * r]), "f"(acc_dq[c][2 * r + 1])
                     : "memory");
      }
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    named_barrier_sync(2 + warpgroup, 128);
    if (dq_issuer) {
#pragma unroll
      for (int box = 0; box < D / 64; ++box)
        tma_reduce_add(&dq_map, dq_tile + box * kStepM * 128, warpgroup * (D / 2) + 32 * box, plan.head(step), m0, b);
      bulk_commit();
    }
  }
  if (dq_issuer) bulk_wait_done();  // the shared tile must outlive the last reduce

  store_key_rows<T, D>(dk, kv_stride, row0, a.seqlen_k, g, t, acc_dk);
  store_key_rows<T, D>(dv, kv_stride, row0, a.seqlen_k, g, t, acc_dv);
#else
  __trap();  // a build without sm_90a code for a compute capability 9.0 GPU: fail loudly, never write nothing
#endif
}

}  // namespace ignis::cuda::flash::sm90
