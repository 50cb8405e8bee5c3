// Split-K decode attention. The keys of each sequence are cut into chunks of a fixed size chosen
// from the shapes alone; one block per (chunk, kv head or group tile, sequence) scores its chunk
// for every query head of the group (so K and V are read once per group), takes a local softmax
// and writes an unnormalised partial output with its (max, sum); a combine kernel merges the
// partials of each query head by log-sum-exp. Blocks whose chunk holds no visible key exit at
// once, and the combine kernel derives the same chunk range from the length, so nothing in the
// launch depends on the lengths and a captured step replays while the cache grows.
//
// Inside a block, kLanes lanes share one key: each holds 16-byte slices of the query heads in
// registers and of the key row being read, and the q.k dot products are finished by shuffles.
// Each thread issues kUnroll keys' loads before using any, for memory parallelism, and the first
// V rows are loaded with the first K rows. Scores go to
// shared memory in the log2 domain (exp2 is one instruction), one warp per query head turns them
// into weights, then the same lanes read V rows and accumulate weight * v in registers, summed
// across the keys of a warp by shuffles and across warps through shared memory.
#include <climits>

#include "cuda/common/convert.cuh"
#include <optional>

#include "cuda/common/launch.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/attention_decode.h"
#include "ignis/error.h"

namespace ignis::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// 32: a block reads its keys in one round of loads at head_dim 64 (16 is no faster and doubles the
// partials the combine step merges).
constexpr int kMinChunk = 32;
constexpr int kMaxChunk = 512;
constexpr int kUnroll = 4;
constexpr float kLog2e = 1.4426950408889634f;

struct DecodeArgs {
  const int* seqlens;  // [batch]
  long long max_seqlen;
  int heads_q, heads_kv;
  int group;      // heads_q / heads_kv
  int tiles;      // blocks sharing one kv head when the group exceeds the kernel's register tile
  int head_dim;
  int n_slices;   // head_dim / (16-byte pack width)
  int chunk;      // keys per block
  int n_chunks;   // ceil(max_seqlen / chunk)
  float scale;    // multiplies q.k (natural-log domain)
  float softcap;  // 0: off
  long long window_left;
};

// Sequence b's visible keys are [first, len): len clamped to the capacity, first from the window.
struct Visible {
  long long first, len;
};

__device__ __forceinline__ Visible visible_keys(const DecodeArgs& a, long long b) {
  const long long len = min(max(static_cast<long long>(a.seqlens[b]), 0LL), a.max_seqlen);
  long long first = 0;
  if (a.window_left >= 0) first = max(len - 1 - a.window_left, 0LL);
  return {first, len};
}

template <class T, int V>
__device__ __forceinline__ Pack<T, V> zero_pack() {
  Pack<T, V> p;
#pragma unroll
  for (int e = 0; e < V; ++e) p.v[e] = from_float<T>(0.0f);
  return p;
}

// kSlices: 16-byte slices of a row rounded up to a power of two (>= 4); kGroup: query heads a
// block holds in registers.
// The register cap keeps 4 (group 4) or 3 (group 8) blocks resident per SM.
// q: [batch, heads_q, head_dim]; k, v: [batch, max_seqlen, heads_kv, head_dim];
// part_o: [batch, heads_q, n_chunks, head_dim]; part_ml: [batch, heads_q, n_chunks] (max, sum).
template <class T, int kSlices, int kGroup>
__global__ void __launch_bounds__(kThreads, kGroup <= 4 ? 4 : 3)
    decode_split_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        float* __restrict__ part_o, float2* __restrict__ part_ml, DecodeArgs a) {
  pdl_trigger();
  pdl_wait();  // q, the cache rows and the lengths come from the kernels before
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kLanes = kSlices < 32 ? kSlices : 32;  // lanes per key
  constexpr int kPerLane = kSlices / kLanes;           // slices per lane
  constexpr int kKeysPerPass = kThreads / kLanes;
  constexpr int kDimPad = kSlices * kVec;
  constexpr int kScoreFloats = kGroup * kMaxChunk;
  constexpr int kReduceFloats = kWarps * kGroup * kDimPad;
  // Scores, then (once every weight has been used) the per-warp output sums.
  __shared__ float smem[kScoreFloats > kReduceFloats ? kScoreFloats : kReduceFloats];
  using P = Pack<T, kVec>;

  const int chunk = blockIdx.x;
  const int kv_head = blockIdx.y / a.tiles;
  const int tile = blockIdx.y % a.tiles;
  const long long b = blockIdx.z;
  const int head0 = kv_head * a.group + tile * kGroup;
  const int heads = min(kGroup, a.group - tile * kGroup);

  const Visible vis = visible_keys(a, b);
  const long long c0 = static_cast<long long>(chunk) * a.chunk;
  const long long lo = max(c0, vis.first), hi = min(c0 + a.chunk, vis.len);
  if (lo >= hi) return;  // block-uniform; the combine kernel skips this chunk too

  const int tid = threadIdx.x;
  const int lane = tid % 32, warp = tid / 32;
  const int lane_in_key = tid % kLanes, key_in_pass = tid / kLanes;
  const long long D = a.head_dim;
  const long long key_stride = static_cast<long long>(a.heads_kv) * D;
  const long long head_offset = (b * a.max_seqlen * a.heads_kv + kv_head) * D;  // key 0 of this kv head
  const T* k0 = k + head_offset;
  const T* v0 = v + head_offset;
  const long long row0 = (b * a.heads_q + head0) * static_cast<long long>(a.n_chunks) + chunk;  // partial of head0

  float qr[kGroup][kPerLane][kVec];
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int s = 0; s < kPerLane; ++s) {
      const int slice = lane_in_key + s * kLanes;
      if (g < heads && slice < a.n_slices) {
        load_floats<T, kVec>(q + (b * a.heads_q + head0 + g) * D + slice * kVec, qr[g][s]);
#pragma unroll
        for (int e = 0; e < kVec; ++e) qr[g][s][e] *= a.scale;
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) qr[g][s][e] = 0.0f;
      }
    }

  // Rows past the length or slices past head_dim read as zeros: the cache there may hold anything.
  auto load_rows = [&](const T* base_row, long long base, P (&raw)[kUnroll][kPerLane]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long key = base + u * kKeysPerPass + key_in_pass;
#pragma unroll
      for (int s = 0; s < kPerLane; ++s) {
        const int slice = lane_in_key + s * kLanes;
        raw[u][s] = key < hi && slice < a.n_slices
                        ? *reinterpret_cast<const P*>(base_row + key * key_stride + slice * kVec)
                        : zero_pack<T, kVec>();
      }
    }
  };

  // The first V rows do not depend on the scores: loading them now overlaps their latency with the
  // K pass (a chunk of at most kKeysPerPass * kUnroll keys then waits for memory once).
  P v_first[kUnroll][kPerLane];
  load_rows(v0, lo, v_first);

  float* scores = smem;  // [kGroup][kMaxChunk], indexed by key - c0
  for (long long base = lo; base < hi; base += kKeysPerPass * kUnroll) {
    P raw[kUnroll][kPerLane];
    load_rows(k0, base, raw);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kPerLane][kVec];
#pragma unroll
      for (int s = 0; s < kPerLane; ++s)
#pragma unroll
        for (int e = 0; e < kVec; ++e) kf[s][e] = to_float(raw[u][s].v[e]);
      const long long key = base + u * kKeysPerPass + key_in_pass;
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        if (g >= heads) break;  // block-uniform, so every lane reaches the shuffles
        float dot = 0.0f;
#pragma unroll
        for (int s = 0; s < kPerLane; ++s)
#pragma unroll
          for (int e = 0; e < kVec; ++e) dot += qr[g][s][e] * kf[s][e];
#pragma unroll
        for (int offset = kLanes / 2; offset > 0; offset >>= 1) dot += __shfl_xor_sync(kFullMask, dot, offset);
        if (lane_in_key == 0 && key < hi) {
          if (a.softcap > 0.0f) dot = a.softcap * tanhf(dot / a.softcap);
          scores[g * kMaxChunk + (key - c0)] = dot * kLog2e;
        }
      }
    }
  }
  __syncthreads();

  // Local softmax per query head: weights in place, (max, sum) to the partials.
  const int j0 = static_cast<int>(lo - c0), j1 = static_cast<int>(hi - c0);
  for (int g = warp; g < heads; g += kWarps) {
    float* row = scores + g * kMaxChunk;
    float m = -INFINITY;
    for (int j = j0 + lane; j < j1; j += 32) m = fmaxf(m, row[j]);
    m = warp_reduce(m, Max{});
    float l = 0.0f;
    for (int j = j0 + lane; j < j1; j += 32) {
      const float p = exp2f(row[j] - m);
      row[j] = p;
      l += p;
    }
    l = warp_reduce(l, Sum{});
    if (lane == 0) part_ml[row0 + static_cast<long long>(g) * a.n_chunks] = make_float2(m, l);
  }
  __syncthreads();

  float acc[kGroup][kPerLane][kVec];
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int s = 0; s < kPerLane; ++s)
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[g][s][e] = 0.0f;

  for (long long base = lo; base < hi; base += kKeysPerPass * kUnroll) {
    P raw[kUnroll][kPerLane];
    if (base == lo) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int s = 0; s < kPerLane; ++s) raw[u][s] = v_first[u][s];
    } else {
      load_rows(v0, base, raw);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long key = base + u * kKeysPerPass + key_in_pass;
      const bool valid = key < hi;
      const int j = valid ? static_cast<int>(key - c0) : 0;
      float p[kGroup];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) p[g] = valid && g < heads ? scores[g * kMaxChunk + j] : 0.0f;
#pragma unroll
      for (int s = 0; s < kPerLane; ++s)
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float x = to_float(raw[u][s].v[e]);
#pragma unroll
          for (int g = 0; g < kGroup; ++g) acc[g][s][e] += p[g] * x;
        }
    }
  }

  // Sum over the keys a warp held side by side (lanes kLanes apart share output dims).
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    if (g >= heads) break;
#pragma unroll
    for (int s = 0; s < kPerLane; ++s)
#pragma unroll
      for (int e = 0; e < kVec; ++e)
#pragma unroll
        for (int offset = kLanes; offset < 32; offset <<= 1)
          acc[g][s][e] += __shfl_xor_sync(kFullMask, acc[g][s][e], offset);
  }
  __syncthreads();  // every weight has been read: the buffer now holds per-warp sums
  float* sums = smem;  // [kWarps][kGroup][kDimPad]
  if (lane < kLanes) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      if (g >= heads) break;
#pragma unroll
      for (int s = 0; s < kPerLane; ++s) {
        const int slice = lane_in_key + s * kLanes;
        if (slice >= a.n_slices) continue;
#pragma unroll
        for (int e = 0; e < kVec; ++e) sums[(warp * kGroup + g) * kDimPad + slice * kVec + e] = acc[g][s][e];
      }
    }
  }
  __syncthreads();
  for (int i = tid; i < heads * a.head_dim; i += kThreads) {
    const int g = i / a.head_dim, d = i % a.head_dim;
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += sums[(w * kGroup + g) * kDimPad + d];
    part_o[(row0 + static_cast<long long>(g) * a.n_chunks) * D + d] = total;
  }
}

// One block per (query head, sequence): merges the partials of the chunks holding visible keys.
// The chunks are spread over the threads (no thread walks them one by one: a serial walk waits
// for memory once per chunk, which cost ~20 us at 68 chunks), each thread owning one float4 of
// head_dim for its share of the chunks, then the shares are summed through shared memory.
constexpr int kCombineTile = 1024;  // chunk weights staged per pass

// part_o: [batch, heads_q, n_chunks, head_dim]; part_ml: [batch, heads_q, n_chunks]; o: [batch, heads_q, head_dim].
template <class T>
__global__ void __launch_bounds__(kThreads)
    decode_combine_kernel(const float* __restrict__ part_o, const float2* __restrict__ part_ml, T* __restrict__ o,
                          DecodeArgs a) {
  pdl_trigger();
  pdl_wait();  // the partials of the split kernel
  __shared__ float scratch[32];
  __shared__ float weight[kCombineTile];
  __shared__ float4 shares[kThreads];
  const int tid = threadIdx.x;
  const int h = blockIdx.x;
  const long long b = blockIdx.y;
  const Visible vis = visible_keys(a, b);
  const long long D = a.head_dim;
  T* out = o + (b * a.heads_q + h) * D;
  const int c_lo = vis.len > 0 ? static_cast<int>(vis.first / a.chunk) : 0;
  const int c_hi = static_cast<int>((vis.len + a.chunk - 1) / a.chunk);
  if (c_lo >= c_hi) {  // no visible key
    for (long long d = tid; d < D; d += kThreads) out[d] = from_float<T>(0.0f);
    return;
  }
  const long long row = (b * a.heads_q + h) * static_cast<long long>(a.n_chunks);

  float m = -INFINITY;
  for (int c = c_lo + tid; c < c_hi; c += kThreads) m = fmaxf(m, part_ml[row + c].x);
  m = block_reduce(m, Max{}, scratch);
  float l = 0.0f;
  for (int c = c_lo + tid; c < c_hi; c += kThreads) {
    const float2 ml = part_ml[row + c];
    l += exp2f(ml.x - m) * ml.y;
  }
  l = block_reduce(l, Sum{}, scratch);
  const float inv = 1.0f / l;  // l >= 1: the chunk holding the max contributes exp2(0) * (its sum >= 1)

  const int packs = a.head_dim / 4;       // float4s a row (head_dim is a multiple of 8, at most 256)
  const int groups = kThreads / packs;    // threads sharing one float4 column, each a share of the chunks
  const int pack = tid % packs, group = tid / packs;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int t0 = c_lo; t0 < c_hi; t0 += kCombineTile) {
    const int t1 = min(c_hi, t0 + kCombineTile);
    __syncthreads();  // the previous pass's weights have been read
    for (int c = t0 + tid; c < t1; c += kThreads) weight[c - t0] = exp2f(part_ml[row + c].x - m);
    __syncthreads();
    if (group < groups) {
#pragma unroll 4
      for (int c = t0 + group; c < t1; c += groups) {
        const float w = weight[c - t0];
        const float4 x = reinterpret_cast<const float4*>(part_o + (row + c) * D)[pack];
        acc.x += w * x.x;
        acc.y += w * x.y;
        acc.z += w * x.z;
        acc.w += w * x.w;
      }
    }
  }
  shares[tid] = acc;
  __syncthreads();
  for (int p = tid; p < packs; p += kThreads) {
    float4 total = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int g = 0; g < groups; ++g) {
      const float4 x = shares[g * packs + p];
      total.x += x.x;
      total.y += x.y;
      total.z += x.z;
      total.w += x.w;
    }
    out[4 * p + 0] = from_float<T>(total.x * inv);
    out[4 * p + 1] = from_float<T>(total.y * inv);
    out[4 * p + 2] = from_float<T>(total.z * inv);
    out[4 * p + 3] = from_float<T>(total.w * inv);
  }
}

struct Plan {
  int group_tile;  // kGroup: 4 or 8
  int tiles;
  int chunk;
  long long n_chunks;
};

Plan plan_for(std::int64_t batch, std::int64_t max_seqlen, std::int64_t heads_q, std::int64_t heads_kv) {
  Plan p;
  const std::int64_t group = heads_q / heads_kv;
  p.group_tile = group <= 4 ? 4 : 8;
  p.tiles = static_cast<int>((group + p.group_tile - 1) / p.group_tile);
  // The smallest chunk that keeps the grid within ~4 blocks an SM (several resident at once, one
  // wave); past that, chunks of kMaxChunk keys and more waves.
  const std::int64_t columns = batch * heads_kv * p.tiles;
  const std::int64_t target = 4LL * sm_count();
  p.chunk = kMinChunk;
  while (p.chunk < kMaxChunk && (max_seqlen + p.chunk - 1) / p.chunk * columns > target) p.chunk *= 2;
  p.n_chunks = (max_seqlen + p.chunk - 1) / p.chunk;
  return p;
}

// q: [batch, heads_q, head_dim]; k, v: [batch, max_seqlen, heads_kv, head_dim];
// part_o: [batch, heads_q, n_chunks, head_dim]; part_ml: [batch, heads_q, n_chunks].
template <class T, int kSlices, int kGroup>
void launch_split(const T* q, const T* k, const T* v, float* part_o, float2* part_ml, const DecodeArgs& args,
                  dim3 grid, Stream stream) {
  launch_kernel(decode_split_kernel<T, kSlices, kGroup>, grid, kThreads, 0, stream, q, k, v, part_o, part_ml, args);
  IGNIS_CHECK_LAUNCH();
}

// q, k, v, part_o, part_ml: as launch_split's.
template <class T, int kSlices>
void launch_split_group(int group_tile, const T* q, const T* k, const T* v, float* part_o, float2* part_ml,
                        const DecodeArgs& args, dim3 grid, Stream stream) {
  if (group_tile == 4) return launch_split<T, kSlices, 4>(q, k, v, part_o, part_ml, args, grid, stream);
  launch_split<T, kSlices, 8>(q, k, v, part_o, part_ml, args, grid, stream);
}

// Where the partials live: per (sequence, query head, chunk) an output row, then a (max, sum) pair.
struct Layout {
  std::size_t o_bytes, total;
};

Layout layout_for(std::int64_t batch, std::int64_t heads_q, std::int64_t head_dim, const Plan& plan) {
  const std::size_t partials = static_cast<std::size_t>(batch * heads_q * plan.n_chunks);
  const std::size_t o_bytes = align_up(partials * static_cast<std::size_t>(head_dim) * sizeof(float));
  return {o_bytes, o_bytes + partials * sizeof(float2)};
}

// q, o: [batch, 1, heads_q, head_dim]; k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim];
// seqlens_k: [batch].
template <class T>
void launch(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const int* seqlens_k, const Tensor& o,
            const AttentionParams& params, void* workspace, Stream stream) {
  constexpr int kVec = 16 / sizeof(T);
  const std::int64_t batch = q.size(0), heads_q = q.size(2), head_dim = q.size(3);
  const std::int64_t max_seqlen = k_cache.size(1), heads_kv = k_cache.size(2);
  const Plan plan = plan_for(batch, max_seqlen, heads_q, heads_kv);
  const std::int64_t grid_y = heads_kv * plan.tiles;
  check_arg(grid_y <= 65535, "attention_decode_forward", "heads_kv * ceil(group / 8)", "<= 65535", grid_y);
  check_arg(plan.n_chunks <= INT_MAX, "attention_decode_forward", "chunks of max_seqlen", "<= 2147483647",
            plan.n_chunks);

  DecodeArgs args;
  args.seqlens = seqlens_k;
  args.max_seqlen = max_seqlen;
  args.heads_q = static_cast<int>(heads_q);
  args.heads_kv = static_cast<int>(heads_kv);
  args.group = static_cast<int>(heads_q / heads_kv);
  args.tiles = plan.tiles;
  args.head_dim = static_cast<int>(head_dim);
  args.n_slices = static_cast<int>(head_dim / kVec);
  args.chunk = plan.chunk;
  args.n_chunks = static_cast<int>(plan.n_chunks);
  args.scale = static_cast<float>(params.scale);
  args.softcap = static_cast<float>(params.softcap);
  args.window_left = params.window_left;

  const Layout layout = layout_for(batch, heads_q, head_dim, plan);
  std::optional<Scratch> owned;
  if (workspace == nullptr) workspace = owned.emplace(layout.total, stream).at<char>(0);
  auto* part_o = reinterpret_cast<float*>(workspace);
  auto* part_ml = reinterpret_cast<float2*>(static_cast<char*>(workspace) + layout.o_bytes);

  const dim3 grid(static_cast<unsigned>(plan.n_chunks), static_cast<unsigned>(grid_y), static_cast<unsigned>(batch));
  const T* qp = q.data_as<const T>();
  const T* kp = k_cache.data_as<const T>();
  const T* vp = v_cache.data_as<const T>();
  int slices = 4;  // padded to a power of two so lanes per key divide a warp
  while (slices < args.n_slices) slices *= 2;
  switch (slices) {
    case 4: launch_split_group<T, 4>(plan.group_tile, qp, kp, vp, part_o, part_ml, args, grid, stream); break;
    case 8: launch_split_group<T, 8>(plan.group_tile, qp, kp, vp, part_o, part_ml, args, grid, stream); break;
    case 16: launch_split_group<T, 16>(plan.group_tile, qp, kp, vp, part_o, part_ml, args, grid, stream); break;
    case 32: launch_split_group<T, 32>(plan.group_tile, qp, kp, vp, part_o, part_ml, args, grid, stream); break;
    default:
      if constexpr (sizeof(T) == 4) {
        launch_split_group<T, 64>(plan.group_tile, qp, kp, vp, part_o, part_ml, args, grid, stream);
        break;
      } else {
        fail_expected("attention_decode_forward", "q.size(3) (head_dim)", "<= 256", head_dim);
      }
  }
  launch_kernel(decode_combine_kernel<T>, dim3(static_cast<unsigned>(heads_q), static_cast<unsigned>(batch)), kThreads,
                0, stream, part_o, part_ml, o.data_as<T>(), args);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

int attention_decode_chunk(std::int64_t batch, std::int64_t max_seqlen, std::int64_t heads_q, std::int64_t heads_kv) {
  return plan_for(batch, max_seqlen, heads_q, heads_kv).chunk;
}

std::size_t attention_decode_workspace_bytes(std::int64_t batch, std::int64_t max_seqlen, std::int64_t heads_q,
                                             std::int64_t heads_kv, std::int64_t head_dim) {
  return layout_for(batch, heads_q, head_dim, plan_for(batch, max_seqlen, heads_q, heads_kv)).total;
}

void attention_decode_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const int* seqlens_k,
                              const Tensor& o, const AttentionParams& params, void* workspace, Stream stream) {
  switch (q.dtype()) {
    case DType::f32: return launch<float>(q, k_cache, v_cache, seqlens_k, o, params, workspace, stream);
    case DType::f16: return launch<__half>(q, k_cache, v_cache, seqlens_k, o, params, workspace, stream);
    case DType::bf16: return launch<__nv_bfloat16>(q, k_cache, v_cache, seqlens_k, o, params, workspace, stream);
    default: fail_expected("attention_decode_forward", "q.dtype", "f32, f16 or bf16", q.dtype());
  }
}

}  // namespace ignis::cuda
