// Flash attention backward on tensor cores (mma.sync m16n8k16, fp32 accumulation, sm_80+): dq, dk and dv of
// o = softmax(scale q k^T, masked) v, recomputing P from the forward's lse (FlashAttention-2's backward), so the
// seqlen_q x seqlen_k matrix is never stored. Three kernels:
// 1. prepare: delta_i = dout_i . o_i for every query row (fp32), and the fp32 dq accumulator zeroed.
// 2. the main kernel: one block of 4 warps per (64-key tile, kv head, sequence); warp w owns keys 16w..16w+15.
//    The tile's K and V stay in shared memory while the block walks, for each query head of the kv head's
//    group, the 64-row query tiles that see some of its keys (Q, dout, lse and delta double buffered by
//    cp.async). Per query tile and warp:
//      S^T = K Q^T and dP^T = V dout^T (16 keys x 64 queries, fp32 registers);
//      P^T = exp(S^T - lse) (0 where masked), dS^T = scale P^T (dP^T - delta) (times 1 - tanh^2 under softcap);
//      dV += P^T dout and dK += dS^T Q, with P^T and dS^T rounded to T straight from registers as A fragments;
//      dS^T through shared memory, so that warp w then computes dQ's rows 16w.. = dS K and adds them to the
//      accumulator with fp32 atomics (the only cross-block sum; its order, and so its rounding, varies).
//    dK and dV are summed over the group's query heads in registers and written once.
// 3. finish: dq = the accumulator rounded to T.
// Compute capability 9.0 runs the wgmma main kernel of flash_backward_sm90.cuh instead (wgmma_backward_chosen).
// Shared rows are padded by 16 bytes (load_padded_rows). Fragment layouts: flash_mma.cuh.
#include <array>
#include <atomic>

#include "cuda/common/launch.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/flash_backward.h"
#include "cuda/ops/flash_backward_common.cuh"
#include "cuda/ops/flash_backward_sm90.cuh"
#include "cuda/ops/flash_kernel_common.cuh"
#include "cuda/ops/flash_launch_common.cuh"
#include "cuda/ops/flash_mma.cuh"

namespace ignis::cuda {
namespace {

using flash::BackwardArgs;
using flash::smem_address;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockN = kWarps * 16;  // keys a block
constexpr int kBlockM = 64;           // query rows a step

template <int D>
struct Layout {
  static constexpr int kStride = D + 8;  // shared row stride of the K, V, Q and dout tiles, in elements
  static constexpr int kTile = 64 * kStride;
  static constexpr int kDsStride = kBlockM + 8;  // dS^T rows: one per key, kBlockM queries
  // K, V, Q buffers 0 and 1, dout buffers 0 and 1, dS^T (all T); then lse and delta, two buffers each (f32).
  static constexpr int kSmemBytes = (6 * kTile + kBlockN * kDsStride) * 2 + 4 * kBlockM * 4;
};

// The prepare kernel's rows: D / 8 lanes a row, 8 dims (16 bytes of T) a lane.
constexpr int kPrepareThreads = 256;
template <int D>
constexpr int kPrepareRowsPerBlock = kPrepareThreads / (D / 8);

// delta = rowwise dout . o (fp32) and the row's dq accumulator zeroed. Row r of o's order (rows = batch *
// seqlen_q * heads_q) is token r / heads_q, head r % heads_q.
// o, dout: [rows, D]; delta: [batch, heads_q, seqlen_q]; dq_accum: [rows, D].
template <class T, int D>
__global__ void __launch_bounds__(kPrepareThreads)
    flash_backward_prepare_kernel(const T* __restrict__ o, const T* __restrict__ dout, float* __restrict__ delta,
                                  float* __restrict__ dq_accum, long long rows, int seqlen_q, int heads_q) {
  constexpr int kLanes = D / 8;
  const long long row = static_cast<long long>(blockIdx.x) * kPrepareRowsPerBlock<D> + threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes;
  const bool active = row < rows;  // lanes past the last row still join the shuffles
  float sum = 0.0f;
  if (active) {
    const uint4 o_chunk = *reinterpret_cast<const uint4*>(o + row * D + lane * 8);
    const uint4 dout_chunk = *reinterpret_cast<const uint4*>(dout + row * D + lane * 8);
    const T* ov = reinterpret_cast<const T*>(&o_chunk);
    const T* dv = reinterpret_cast<const T*>(&dout_chunk);
#pragma unroll
    for (int e = 0; e < 8; ++e) sum += static_cast<float>(ov[e]) * static_cast<float>(dv[e]);
    float4* accum = reinterpret_cast<float4*>(dq_accum + row * D + lane * 8);
    accum[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    accum[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (!active || lane != 0) return;
  const long long token = row / heads_q, b = token / seqlen_q, i = token % seqlen_q;
  delta[(b * heads_q + row % heads_q) * seqlen_q + i] = sum;
}

// dq = dq_accum rounded to T, 8 elements a thread. dq_accum, dq: [count] (count a multiple of 8).
template <class T>
__global__ void flash_backward_finish_kernel(const float* __restrict__ dq_accum, T* __restrict__ dq,
                                             long long count) {
  const long long e = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (e >= count) return;
  const float4 x = *reinterpret_cast<const float4*>(dq_accum + e);
  const float4 y = *reinterpret_cast<const float4*>(dq_accum + e + 4);
  *reinterpret_cast<uint4*>(dq + e) = make_uint4(flash::pack2<T>(x.x, x.y), flash::pack2<T>(x.z, x.w),
                                                 flash::pack2<T>(y.x, y.y), flash::pack2<T>(y.z, y.w));
}

// grid: (key tiles, heads_kv, batch); see the file comment.
template <class T, int D>
__global__ void __launch_bounds__(kThreads) flash_backward_kernel(const BackwardArgs a) {
  using L = Layout<D>;
  constexpr int kStride = L::kStride;
  constexpr int kTile = L::kTile;
  constexpr int kDsStride = L::kDsStride;
  constexpr int kSteps = D / 16;             // k-steps of S^T and dP^T; dim tile pairs of dK, dV and dQ
  constexpr int kQuerySteps = kBlockM / 16;  // k-steps of dK, dV; A tiles of dS
  extern __shared__ __align__(16) unsigned char smem[];
  T* const s_k = reinterpret_cast<T*>(smem);
  T* const s_v = s_k + kTile;
  T* const s_q = s_v + kTile;       // buffer i at s_q + i * kTile
  T* const s_dout = s_q + 2 * kTile;  // buffer i at s_dout + i * kTile
  T* const s_ds = s_dout + 2 * kTile;  // dS^T: [kBlockN keys, kDsStride]
  float* const s_lse = reinterpret_cast<float*>(s_ds + kBlockN * kDsStride);  // buffer i at s_lse + i * kBlockM
  float* const s_delta = s_lse + 2 * kBlockM;

  const int n0 = blockIdx.x * kBlockN, kv_head = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const long long q_stride = static_cast<long long>(a.heads_q) * D;
  const long long kv_stride = static_cast<long long>(a.heads_kv) * D;
  const long long kv_head0 = (static_cast<long long>(b) * a.seqlen_k * a.heads_kv + kv_head) * D;
  T* const dk = static_cast<T*>(a.dk) + kv_head0;
  T* const dv = static_cast<T*>(a.dv) + kv_head0;

  const int row0 = n0 + 16 * warp;  // this warp's first key
  float acc_dk[D / 8][4], acc_dv[D / 8][4];
  flash::zero_tiles(acc_dk);
  flash::zero_tiles(acc_dv);
  flash::QuerySteps<kBlockN, kBlockM> plan;
  if (!plan.plan(a, n0, kv_head)) {  // no query sees these keys: their gradients are zero
    flash::store_key_rows<T, D>(dk, kv_stride, row0, a.seqlen_k, g, t, acc_dk);
    flash::store_key_rows<T, D>(dv, kv_stride, row0, a.seqlen_k, g, t, acc_dv);
    return;
  }
  int key_lo[2], key_hi[2];  // the queries that see this lane's keys row0 + g and row0 + g + 8
#pragma unroll
  for (int r = 0; r < 2; ++r) flash::queries_of_key(a, row0 + g + 8 * r, key_lo[r], key_hi[r]);

  auto load_step = [&](int step, int buf) {
    const int h = plan.head(step), m0 = plan.m0(step);
    const long long q_head0 = (static_cast<long long>(b) * a.seqlen_q * a.heads_q + h) * D;
    flash::load_padded_rows<T, D, kBlockM, kThreads>(s_q + buf * kTile, static_cast<const T*>(a.q) + q_head0,
                                                     q_stride, m0, a.seqlen_q);
    flash::load_padded_rows<T, D, kBlockM, kThreads>(s_dout + buf * kTile, static_cast<const T*>(a.dout) + q_head0,
                                                     q_stride, m0, a.seqlen_q);
    flash::load_step_stats<kBlockM>(a, b, h, m0, smem_address(s_lse + buf * kBlockM),
                                    smem_address(s_delta + buf * kBlockM));
  };

  flash::load_padded_rows<T, D, kBlockN, kThreads>(s_k, static_cast<const T*>(a.k) + kv_head0, kv_stride, n0,
                                                   a.seqlen_k);
  flash::load_padded_rows<T, D, kBlockN, kThreads>(s_v, static_cast<const T*>(a.v) + kv_head0, kv_stride, n0,
                                                   a.seqlen_k);
  load_step(0, 0);
  flash::cp_async_commit();

  for (int step = 0; step < plan.steps; ++step) {
    const int buf = step & 1;
    if (step + 1 < plan.steps) load_step(step + 1, buf ^ 1);
    flash::cp_async_commit();  // possibly empty, so that wait<1> below always means "this step landed"
    flash::cp_async_wait<1>();
    __syncthreads();

    const int m0 = plan.m0(step);
    const T* const tile_q = s_q + buf * kTile;
    const T* const tile_dout = s_dout + buf * kTile;
    const float* const lse = s_lse + buf * kBlockM;
    const float* const delta = s_delta + buf * kBlockM;

    // S^T = K Q^T and dP^T = V dout^T: A = this warp's K (V) rows, B[k][n] = Q[query n][dim k] read without
    // transpose, as the forward reads K (flash_attention.cu).
    float s[kBlockM / 8][4], dp[kBlockM / 8][4];
    flash::zero_tiles(s);
    flash::zero_tiles(dp);
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      std::uint32_t ka[4], va[4];
      const int a_offset = (16 * warp + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8;
      flash::ldmatrix_x4(ka, smem_address(s_k + a_offset));
      flash::ldmatrix_x4(va, smem_address(s_v + a_offset));
#pragma unroll
      for (int jp = 0; jp < kBlockM / 16; ++jp) {
        std::uint32_t qb[4], db[4];
        const int b_offset = (jp * 16 + (lane & 7) + (lane >> 4) * 8) * kStride + kk * 16 + ((lane >> 3) & 1) * 8;
        flash::ldmatrix_x4(qb, smem_address(tile_q + b_offset));
        flash::ldmatrix_x4(db, smem_address(tile_dout + b_offset));
        flash::mma_16x8x16<T>(s[2 * jp], ka, qb[0], qb[1]);
        flash::mma_16x8x16<T>(s[2 * jp + 1], ka, qb[2], qb[3]);
        flash::mma_16x8x16<T>(dp[2 * jp], va, db[0], db[1]);
        flash::mma_16x8x16<T>(dp[2 * jp + 1], va, db[2], db[3]);
      }
    }

    flash::probs_and_grads(s, dp, a, lse, delta, m0, t, key_lo, key_hi);

    // dV += P^T dout and dK += dS^T Q: A from registers (pack_p), B[k][n] = dout[query k][dim n] through the
    // transposed load, as the forward reads V. dS^T also goes to shared memory for dQ.
#pragma unroll
    for (int kk = 0; kk < kQuerySteps; ++kk) {
      std::uint32_t pa[4], dsa[4];
      flash::pack_p<T>(s, kk, pa);
      flash::pack_p<T>(dp, kk, dsa);
      T* const ds_row = s_ds + (16 * warp + g) * kDsStride + 16 * kk + 2 * t;
      *reinterpret_cast<std::uint32_t*>(ds_row) = dsa[0];
      *reinterpret_cast<std::uint32_t*>(ds_row + 8 * kDsStride) = dsa[1];
      *reinterpret_cast<std::uint32_t*>(ds_row + 8) = dsa[2];
      *reinterpret_cast<std::uint32_t*>(ds_row + 8 * kDsStride + 8) = dsa[3];
#pragma unroll
      for (int dpair = 0; dpair < kSteps; ++dpair) {
        std::uint32_t db[4], qb[4];
        const int b_offset = (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + dpair * 16 + (lane >> 4) * 8;
        flash::ldmatrix_x4_trans(db, smem_address(tile_dout + b_offset));
        flash::ldmatrix_x4_trans(qb, smem_address(tile_q + b_offset));
        flash::mma_16x8x16<T>(acc_dv[2 * dpair], pa, db[0], db[1]);
        flash::mma_16x8x16<T>(acc_dv[2 * dpair + 1], pa, db[2], db[3]);
        flash::mma_16x8x16<T>(acc_dk[2 * dpair], dsa, qb[0], qb[1]);
        flash::mma_16x8x16<T>(acc_dk[2 * dpair + 1], dsa, qb[2], qb[3]);
      }
    }
    __syncthreads();  // dS^T complete; every warp is done with this step's Q and dout

    // dQ rows m0 + 16w.. += dS K, 64 dims at a time: A[query][key] = dS^T[key][query] through the transposed
    // load (matrices: keys 0-7 x queries 0-7, keys 0-7 x queries 8-15, keys 8-15 x queries 0-7, keys 8-15 x
    // queries 8-15), B[k][n] = K[key k][dim n] transposed.
    const long long q_head0 = (static_cast<long long>(b) * a.seqlen_q * a.heads_q + plan.head(step)) * D;
    float* const dq_rows = a.dq_accum + q_head0;
#pragma unroll
    for (int half = 0; half < D / 64; ++half) {
      float acc_dq[8][4];
      flash::zero_tiles(acc_dq);
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        std::uint32_t dsa[4];
        flash::ldmatrix_x4_trans(
            dsa, smem_address(s_ds + (kk * 16 + (lane & 7) + ((lane >> 4) & 1) * 8) * kDsStride + 16 * warp +
                              ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int dpair = 0; dpair < 4; ++dpair) {
          std::uint32_t kb[4];
          flash::ldmatrix_x4_trans(kb, smem_address(s_k + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride +
                                                    half * 64 + dpair * 16 + (lane >> 4) * 8));
          flash::mma_16x8x16<T>(acc_dq[2 * dpair], dsa, kb[0], kb[1]);
          flash::mma_16x8x16<T>(acc_dq[2 * dpair + 1], dsa, kb[2], kb[3]);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = m0 + 16 * warp + g + 8 * r;
        if (i >= a.seqlen_q) continue;
#pragma unroll
        for (int c = 0; c < 8; ++c)
          flash::add_pair(dq_rows + i * q_stride + half * 64 + 8 * c + 2 * t, acc_dq[c][2 * r], acc_dq[c][2 * r + 1]);
      }
    }
    // The next step's first barrier orders these reads of dS^T before its writes; its copies go to the other
    // buffers, which every warp left at this step's second barrier.
  }

  flash::store_key_rows<T, D>(dk, kv_stride, row0, a.seqlen_k, g, t, acc_dk);
  flash::store_key_rows<T, D>(dv, kv_stride, row0, a.seqlen_k, g, t, acc_dv);
}

// Whether the current device runs the wgmma main kernel (flash_backward_sm90.cuh): compute capability 9.0 unless
// the environment sets IGNIS_FLASH_KERNEL=mma_sync (as for the forward: the tests use it to cover the mma.sync kernel
// on Hopper). Sets the chosen kernel's shared memory limit once a device, so launches need not.
template <class T, int D>
bool wgmma_backward_chosen() {
  static std::array<std::atomic<int>, kCachedDevices> cache{};  // 1: mma.sync, 2: wgmma
  return once_per_device(cache, [] {
    if (flash::wgmma_kernels_chosen()) {
      IGNIS_CUDA_CHECK(cudaFuncSetAttribute(flash::sm90::flash_backward_wgmma_kernel<T, D>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            flash::sm90::BackwardLayout<D>::kSmemBytes));
      return 2;
    }
    IGNIS_CUDA_CHECK(cudaFuncSetAttribute(flash_backward_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          Layout<D>::kSmemBytes));
    return 1;
  }) == 2;
}

// dout, q, o, dq: [batch, seqlen_q, heads_q, D]; k, v, dk, dv: [batch, seqlen_k, heads_kv, D];
// lse: [batch, heads_q, seqlen_q] f32.
template <class T, int D>
void launch(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
            const Tensor& dq, const Tensor& dk, const Tensor& dv, const AttentionParams& params, Stream stream) {
  const auto batch = q.size(0), seqlen_q = q.size(1), heads_q = q.size(2), seqlen_k = k.size(1);
  const long long rows = batch * seqlen_q * heads_q;
  const std::size_t accum_bytes = align_up(static_cast<std::size_t>(rows * D) * sizeof(float));
  const Scratch scratch(accum_bytes + static_cast<std::size_t>(rows) * sizeof(float), stream);
  BackwardArgs args{};
  args.q = q.data();
  args.k = k.data();
  args.v = v.data();
  args.dout = dout.data();
  args.lse = lse.data_as<const float>();
  args.dq_accum = scratch.at<float>(0);
  float* const delta = scratch.at<float>(accum_bytes);
  args.delta = delta;
  args.dk = dk.data();
  args.dv = dv.data();
  args.seqlen_q = static_cast<int>(seqlen_q);
  args.seqlen_k = static_cast<int>(seqlen_k);
  args.heads_q = static_cast<int>(heads_q);
  args.heads_kv = static_cast<int>(k.size(2));
  args.group = args.heads_q / args.heads_kv;
  args.scale = static_cast<float>(params.scale);
  flash::set_score_args(args, params, seqlen_q, seqlen_k);

  const cudaStream_t s = to_cuda(stream);
  flash_backward_prepare_kernel<T, D><<<ceil_div(rows, kPrepareRowsPerBlock<D>), kPrepareThreads, 0, s>>>(
      o.data_as<const T>(), dout.data_as<const T>(), delta, args.dq_accum, rows, args.seqlen_q, args.heads_q);
  IGNIS_CHECK_LAUNCH();
  if (wgmma_backward_chosen<T, D>()) {
    using Sm90 = flash::sm90::BackwardLayout<D>;
    const dim3 grid(ceil_div(seqlen_k, Sm90::kBlockN), static_cast<unsigned>(args.heads_kv),
                    static_cast<unsigned>(batch));
    flash::sm90::flash_backward_wgmma_kernel<T, D><<<grid, Sm90::kThreads, Sm90::kSmemBytes, s>>>(
        args, flash::tensor_map(q, Sm90::kStepM), flash::tensor_map(dout, Sm90::kStepM),
        flash::tensor_map(k, Sm90::kBlockN), flash::tensor_map(v, Sm90::kBlockN),
        flash::encode_tensor_map(args.dq_accum, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, batch, seqlen_q, heads_q, D, 32,
                                 Sm90::kStepM));
  } else {
    const dim3 grid(ceil_div(seqlen_k, kBlockN), static_cast<unsigned>(args.heads_kv), static_cast<unsigned>(batch));
    flash_backward_kernel<T, D><<<grid, kThreads, Layout<D>::kSmemBytes, s>>>(args);
  }
  IGNIS_CHECK_LAUNCH();
  constexpr int kFinishThreads = 256;
  flash_backward_finish_kernel<T><<<ceil_div(rows * D / 8, kFinishThreads), kFinishThreads, 0, s>>>(
      args.dq_accum, dq.data_as<T>(), rows * D);
  IGNIS_CHECK_LAUNCH();
}

// As launch, for q's head dim (64 or 128, checked by the dispatcher).
template <class T>
void launch_dim(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv, const AttentionParams& params,
                Stream stream) {
  switch (q.size(3)) {
    case 64: return launch<T, 64>(dout, q, k, v, o, lse, dq, dk, dv, params, stream);
    case 128: return launch<T, 128>(dout, q, k, v, o, lse, dq, dk, dv, params, stream);
    default: fail_expected("flash_attention_backward", "q.size(3) (head_dim)", "64 or 128", q.size(3));
  }
}

}  // namespace

void flash_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const AttentionParams& params, Stream stream) {
  switch (q.dtype()) {
    case DType::bf16: return launch_dim<__nv_bfloat16>(dout, q, k, v, o, lse, dq, dk, dv, params, stream);
    case DType::f16: return launch_dim<__half>(dout, q, k, v, o, lse, dq, dk, dv, params, stream);
    default: fail_expected("flash_attention_backward", "q.dtype", "bf16 or f16", q.dtype());
  }
}

}  // namespace ignis::cuda
