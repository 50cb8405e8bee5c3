#pragma once
// Flash attention backward on Hopper's warpgroup MMA (wgmma, sm_90a): the main kernel flash_backward.cu launches
// on compute capability 9.0 (its prepare and finish kernels are the same on every GPU).
//
// One block of two warpgroups per (128 keys, kv head, sequence); warpgroup w owns keys 64w..64w+63, and within it
// warp i keys 16i..16i+15, in the C layout of flash_kernel_common.cuh. The block walks 64-query steps as the
// mma.sync kernel does (flash_backward_common.cuh). Per step and warpgroup, all from 128-byte-swizzled shared
// tiles (flash_wgmma.cuh's layout):
//   S^T = K Q^T and dP^T = V dout^T: wgmma m64n64k16 chains with both operands K-major, as the forward's S;
//   P^T and dS^T from their registers (probs_and_grads);
//   dV += P^T dout and dK += dS^T Q: wgmma m64nDk16 with A from registers and B MN-major, as the forward's P V;
//   dS^T to shared memory; once both warpgroups' rows are there, dQ = dS K over the block's 128 keys, each
//   warpgroup computing half of dQ's columns with A = dS^T read transposed (MN-major) and B = K MN-major, then
//   fp32 atomics into the accumulator.
// Q, dout, lse and delta of step s + 1 are copied (cp.async, every thread) while step s computes.
#include <cstdint>

#include "cuda/ops/flash_backward_common.cuh"
#include "cuda/ops/flash_wgmma.cuh"

namespace ignis::cuda::flash::sm90 {

template <int D>
struct BackwardLayout {
  static constexpr int kWarpgroups = 2;
  static constexpr int kThreads = kWarpgroups * 128;
  static constexpr int kBlockN = kWarpgroups * 64;  // keys a block
  static constexpr int kStepM = 64;                 // queries a step
  static constexpr int kKvBytes = kBlockN * D * 2;  // K or V: D/64 column blocks of kBlockN lines
  static constexpr int kStepBytes = kStepM * D * 2;  // Q or dout of a step
  static constexpr int kDsBytes = kBlockN * kStepM * 2;  // dS^T: one column block of kBlockN lines
  static constexpr int kStatsBytes = 2 * 2 * kStepM * 4;  // lse and delta, two buffers each
  static constexpr int kSmemBytes = 2 * kKvBytes + 4 * kStepBytes + kDsBytes + kStatsBytes + 1024;  // + alignment
};

// grid: (key blocks of 128, heads_kv, batch). Compiled for sm_90a only (elsewhere the body traps; the launcher
// picks it on compute capability 9.0, which the default build targets with sm_90a code).
template <class T, int D>
__global__ void __launch_bounds__(BackwardLayout<D>::kThreads, 1) flash_backward_wgmma_kernel(const BackwardArgs a) {
#if IGNIS_FLASH_WGMMA
  using L = BackwardLayout<D>;
  constexpr int kBlockN = L::kBlockN, kStepM = L::kStepM, kThreads = L::kThreads;
  constexpr int kDqTiles = D / 16;  // dQ columns a warpgroup computes (D / 2), in tiles of 8
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The swizzle is applied to address bits 4-9, so tiles start on 1024-byte boundaries.
  const std::uint32_t smem = (smem_address(smem_raw) + 1023u) & ~1023u;
  const std::uint32_t s_k = smem, s_v = s_k + L::kKvBytes;
  const std::uint32_t s_q = s_v + L::kKvBytes;          // buffer i at s_q + i * kStepBytes
  const std::uint32_t s_dout = s_q + 2 * L::kStepBytes;  // buffer i at s_dout + i * kStepBytes
  const std::uint32_t s_ds = s_dout + 2 * L::kStepBytes;
  const std::uint32_t s_stats = s_ds + L::kDsBytes;  // lse buffer i at + i * 256, delta buffer i at + 512 + i * 256
  float* const stats = reinterpret_cast<float*>(smem_raw + (s_stats - smem_address(smem_raw)));

  const int n0 = blockIdx.x * kBlockN, kv_head = blockIdx.y, b = blockIdx.z;
  const int warpgroup = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const long long q_stride = static_cast<long long>(a.heads_q) * D;
  const long long kv_stride = static_cast<long long>(a.heads_kv) * D;
  const long long kv_head0 = (static_cast<long long>(b) * a.seqlen_k * a.heads_kv + kv_head) * D;
  T* const dk = static_cast<T*>(a.dk) + kv_head0;
  T* const dv = static_cast<T*>(a.dv) + kv_head0;
  const int row0 = n0 + 64 * warpgroup + 16 * warp;  // this warp's first key

  float acc_dk[D / 8][4], acc_dv[D / 8][4];
  zero_tiles(acc_dk);
  zero_tiles(acc_dv);
  QuerySteps<kBlockN, kStepM> plan;
  if (!plan.plan(a, n0, kv_head)) {  // no query sees these keys: their gradients are zero
    store_key_rows<T, D>(dk, kv_stride, row0, a.seqlen_k, g, t, acc_dk);
    store_key_rows<T, D>(dv, kv_stride, row0, a.seqlen_k, g, t, acc_dv);
    return;
  }
  int key_lo[2], key_hi[2];  // the queries that see this lane's keys row0 + g and row0 + g + 8
#pragma unroll
  for (int r = 0; r < 2; ++r) queries_of_key(a, row0 + g + 8 * r, key_lo[r], key_hi[r]);

  auto load_step = [&](int step) {  // as one cp.async group, into buffer step % 2
    if (step < plan.steps) {
      const int buf = step & 1, h = plan.head(step), m0 = plan.m0(step);
      const long long q_head0 = (static_cast<long long>(b) * a.seqlen_q * a.heads_q + h) * D;
      load_swizzled<T, D, kStepM, kThreads>(s_q + buf * L::kStepBytes, static_cast<const T*>(a.q) + q_head0,
                                            q_stride, m0, a.seqlen_q);
      load_swizzled<T, D, kStepM, kThreads>(s_dout + buf * L::kStepBytes, static_cast<const T*>(a.dout) + q_head0,
                                            q_stride, m0, a.seqlen_q);
      load_step_stats<kStepM>(a, b, h, m0, s_stats + buf * 256, s_stats + 512 + buf * 256);
    }
    cp_async_commit();
  };
  // Waits for this thread's copies, then makes every thread's copies (and dS^T stores) visible to the tensor
  // cores: cp.async and st.shared write through the generic proxy, wgmma reads through the async one.
  auto sync_for_wgmma = [] {
    cp_async_wait<0>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
  };

  load_swizzled<T, D, kBlockN, kThreads>(s_k, static_cast<const T*>(a.k) + kv_head0, kv_stride, n0, a.seqlen_k);
  load_swizzled<T, D, kBlockN, kThreads>(s_v, static_cast<const T*>(a.v) + kv_head0, kv_stride, n0, a.seqlen_k);
  load_step(0);

  for (int step = 0; step < plan.steps; ++step) {
    const int buf = step & 1, m0 = plan.m0(step);
    sync_for_wgmma();  // this step's copies landed; both warpgroups are past the previous step
    load_step(step + 1);
    const std::uint32_t tile_q = s_q + buf * L::kStepBytes, tile_dout = s_dout + buf * L::kStepBytes;

    // S^T = K Q^T and dP^T = V dout^T over D/16 k-steps: k-step kk is 32 bytes into column block kk / 4; the
    // warpgroup's 64 key rows start 64 lines into each of K's column blocks.
    float s[kStepM / 8][4], dp[kStepM / 8][4];
    fence_accumulators(s);
    fence_accumulators(dp);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const std::uint32_t kv_at = (kk / 4) * kBlockN * 128 + warpgroup * 64 * 128 + (kk % 4) * 32;
      const std::uint32_t q_at = (kk / 4) * kStepM * 128 + (kk % 4) * 32;
      Wgmma<T>::s(s, descriptor(s_k + kv_at, 16, 1024), descriptor(tile_q + q_at, 16, 1024), kk > 0);
      Wgmma<T>::s(dp, descriptor(s_v + kv_at, 16, 1024), descriptor(tile_dout + q_at, 16, 1024), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(s);
    fence_accumulators(dp);

    const float* const lse = stats + buf * kStepM;
    const float* const delta = stats + 2 * kStepM + buf * kStepM;
    probs_and_grads(s, dp, a, lse, delta, m0, t, key_lo, key_hi);
    std::uint32_t p[kStepM / 16][4], ds[kStepM / 16][4];
#pragma unroll
    for (int kk = 0; kk < kStepM / 16; ++kk) {
      pack_p<T>(s, kk, p[kk]);
      pack_p<T>(dp, kk, ds[kk]);
    }
    // dS^T to shared memory, row = key (this lane's rows row0 - n0 + g, + 8), 64 queries a 128-byte line.
#pragma unroll
    for (int kk = 0; kk < kStepM / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = row0 - n0 + g + 8 * (e & 1), query = 16 * kk + 8 * (e / 2);
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(s_ds + swizzled(kBlockN, key, query) + 4 * t),
                     "r"(ds[kk][e])
                     : "memory");
      }

    // dV += P^T dout and dK += dS^T Q over the step's 4 k-steps of 16 queries (2048 bytes apart); a tile's
    // 64-column blocks are kStepM lines apart (the leading offset).
    fence_accumulators(acc_dv);
    fence_accumulators(acc_dk);
    fence_fragments(p);
    fence_fragments(ds);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kStepM / 16; ++kk) {
      Wgmma<T>::pv(acc_dv, p[kk], descriptor(tile_dout + kk * 16 * 128, kStepM * 128, 1024));
      Wgmma<T>::pv(acc_dk, ds[kk], descriptor(tile_q + kk * 16 * 128, kStepM * 128, 1024));
    }
    wgmma_commit();

    // dQ rows m0.. = dS K over the block's 128 keys (8 k-steps of 16 keys, 2048 bytes apart in both tiles); this
    // warpgroup's D / 2 columns of K start at column D / 2 * w (a column block at D 128, 64 bytes into the line
    // at D 64). A = dS^T read transposed: its 64 queries are one line, so the leading offset is unused.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // both warpgroups' dS^T rows are in shared memory
    float acc_dq[kDqTiles][4];
    fence_accumulators(acc_dq);
    wgmma_fence();
    const std::uint32_t k_cols = D == 128 ? warpgroup * kBlockN * 128 : warpgroup * 64;
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      WgmmaTransposed<T>::mma(acc_dq, descriptor(s_ds + kk * 16 * 128, kBlockN * 128, 1024),
                              descriptor(s_k + k_cols + kk * 16 * 128, kBlockN * 128, 1024), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(acc_dq);
    fence_accumulators(acc_dv);
    fence_accumulators(acc_dk);
    fence_fragments(p);
    fence_fragments(ds);

    float* const dq_rows = a.dq_accum + (static_cast<long long>(b) * a.seqlen_q * a.heads_q + plan.head(step)) * D +
                           warpgroup * (D / 2);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = m0 + 16 * warp + g + 8 * r;
      if (i >= a.seqlen_q) continue;
#pragma unroll
      for (int c = 0; c < kDqTiles; ++c)
        add_pair(dq_rows + i * q_stride + 8 * c + 2 * t, acc_dq[c][2 * r], acc_dq[c][2 * r + 1]);
    }
  }

  store_key_rows<T, D>(dk, kv_stride, row0, a.seqlen_k, g, t, acc_dk);
  store_key_rows<T, D>(dv, kv_stride, row0, a.seqlen_k, g, t, acc_dv);
#else
  __trap();  // a build without sm_90a code for a compute capability 9.0 GPU: fail loudly, never write nothing
#endif
}

}  // namespace ignis::cuda::flash::sm90
