#pragma once
// What the multi-pass sampling kernels of sampling.cu share: the tuning constants, the per-row state
// kept between kernels, the job every kernel gets, a block's shared memory, the 64-bit composite
// rank of a token, the walk over a block's slice of a row, the per-row list appends, and the
// last-block handoff.
#include "cuda/common/convert.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/ops/sampling_block.cuh"
#include "ops/sampling_rule.h"

namespace ignis::cuda::multi_pass {

namespace rule = ignis::sampling;
using u64 = unsigned long long;
using one_block::Cut;
using one_block::Weigh;

constexpr int kThreads = 256;
constexpr int kUnroll = 8;        // loads a thread has in flight in a pass over its slice
constexpr int kChunk = 32 * kUnroll;  // the tokens a warp takes a step
static_assert(kThreads % kChunk == 0, "make_job rounds slices to kThreads tokens: whole chunks");
constexpr int kTopShift = 21;     // the top digit: sign, exponent and two mantissa bits of a key
constexpr int kTopBins = 1 << (32 - kTopShift);
constexpr int kSubShift = kTopShift - (32 - kTopShift);  // the refine pass's digit: the next 11 bits
constexpr int kSelBits = 8;       // digits of the radix passes over a list
constexpr int kSelBins = 1 << kSelBits;
constexpr int kMinSlice = 2048;   // tokens a block at least
constexpr int kMaxListBytes = 8 << 20;
constexpr unsigned kNoBin = 0xffffffffu;

enum class Mode : int { top_k, top_p, sample };
enum Stage : int { kScan, kWeigh, kRefine, kCompact, kDraw, kStages };

// One row's results between kernels; zeroed before the first.
struct RowState {
  u64 best;  // largest composite: the argmax
  u64 need;  // what the picked bucket must still supply (a count or a weight)
  u64 cut;   // smallest kept composite; 0 keeps every token
  unsigned arrived[kStages];
  unsigned bin;     // the picked bucket, key >> shift; kNoBin: nothing to cut (no finite logit)
  unsigned shift;   // kTopShift, or kSubShift once the refine pass split the top bucket
  unsigned listed;  // tokens appended to the list
  int overflow;     // the list would not fit: one block finishes the row
};

// A row's top-digit histograms, summed over its blocks (only when a row has several blocks).
struct RowHist {
  unsigned counts[kTopBins];
  u64 weights[kTopBins];
};

struct Job {
  Mode mode;
  int vocab;
  int blocks;  // per row
  int slice;   // tokens per block
  int list_cap;
  std::int64_t k;  // top-k (masks and sampling); 0: off
  u64 p_fixed;
  double scale;  // log2(e) / T
  int bits;
  rule::Plan plan;
  RowState* rows;   // [rows]
  RowHist* hists;   // [rows] with several blocks a row, else [1]
  u64* lists;     // [rows, list_cap]
  u64* list_weights;  // [rows, list_cap], the weights of the listed tokens; not for top-k masks
  int chunks;      // per row: ceil(vocab / kChunk)
  u64* partials;  // [rows, chunks], sampling only
  double table[rule::kExpTableSize];
};

struct PassShared {
  unsigned counts[kTopBins];
  u64 weights[kTopBins];
  u64 sel_weight[kSelBins];
  unsigned sel_count[kSelBins];
  double table[rule::kExpTableSize];
  u64 scratch[32];
  u64 value;
  u64 need;
  unsigned bin;
  int flag;
};

struct BitAnd {
  __device__ u64 operator()(u64 a, u64 b) const { return a & b; }
};
struct BitOr {
  __device__ u64 operator()(u64 a, u64 b) const { return a | b; }
};

__device__ __forceinline__ u64 composite(unsigned key, int i) {
  return (u64{key} << 32) | (0xffffffffu - static_cast<unsigned>(i));
}
__device__ __forceinline__ int composite_index(u64 c) {
  return static_cast<int>(0xffffffffu - static_cast<unsigned>(c));
}
// The float of a key (-0 comes back as +0, which weighs the same).
__device__ __forceinline__ float key_value(unsigned key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}
__device__ __forceinline__ float composite_value(u64 c) { return key_value(static_cast<unsigned>(c >> 32)); }

struct Slice {
  int row, block, lo, hi;
};

__device__ inline Slice slice_of(const Job& job) {
  const int row = blockIdx.x / job.blocks, block = blockIdx.x % job.blocks;
  const int lo = block * job.slice;
  return {row, block, lo, min(lo + job.slice, job.vocab)};
}

// After each warp's chunk of tokens: nothing.
struct NoChunkEnd {
  __device__ void operator()(int) const {}
};

// f(i, v, valid) for the tokens [lo, hi), called by every lane the same number of times (for the
// warp-wide histogram and list updates); each warp loads kUnroll tokens a lane (a chunk of kChunk
// tokens starting at `base`) before using them, then every lane calls chunk_end(base).
// x: [vocab], one row.
template <class T, class F, class ChunkEnd = NoChunkEnd>
__device__ void for_slice(const T* x, int lo, int hi, F f, ChunkEnd chunk_end = {}) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int base = lo + warp * 32 * kUnroll; base < hi; base += warps * 32 * kUnroll) {
    float v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int i = base + j * 32 + lane;
      v[j] = i < hi ? to_float(x[i]) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int i = base + j * 32 + lane;
      f(i, v[j], i < hi);
    }
    chunk_end(base);
  }
}

// Appends c to the list where `take`; warp-aggregated, one atomic per warp.
// list: [cap].
__device__ inline void append(u64* list, unsigned* listed, int cap, bool take, u64 c) {
  const unsigned ballot = __ballot_sync(kFullMask, take);
  if (ballot == 0) return;
  const int lane = threadIdx.x % 32, leader = __ffs(ballot) - 1;
  unsigned base = 0;
  if (lane == leader) base = atomicAdd(listed, static_cast<unsigned>(__popc(ballot)));
  base = __shfl_sync(kFullMask, base, leader);
  const unsigned pos = base + __popc(ballot & ((1u << lane) - 1));
  if (take && pos < static_cast<unsigned>(cap)) list[pos] = c;
}

__device__ inline void load_table(PassShared& s, const Job& job) {
  for (int j = threadIdx.x; j < rule::kExpTableSize; j += blockDim.x) s.table[j] = job.table[j];
}

// Every block of a row calls this after its partial results are out; true in the last one, which
// then sees all of them.
__device__ inline bool last_to_arrive(PassShared& s, unsigned* arrived, int blocks) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s.flag = blocks == 1 || atomicAdd(arrived, 1u) == static_cast<unsigned>(blocks - 1);
  __syncthreads();
  const bool last = s.flag;
  if (last) __threadfence();
  return last;
}

// Scanning bins from the highest down: s.bin is the first at which the running sum of val(bin)
// reaches need, s.need what is left of need for it. All threads must call; ends at a barrier.
template <class Val>
__device__ void pick_bin(PassShared& s, int bins, Val val, u64 need) {
  const int per = (bins + blockDim.x - 1) / blockDim.x;
  const int top = bins - 1 - static_cast<int>(threadIdx.x) * per;  // thread 0 holds the highest bins
  u64 sum = 0;
  for (int j = 0; j < per && top - j >= 0; ++j) sum += val(top - j);
  if (threadIdx.x == 0) {  // need never exceeds the total; this only keeps the result in range
    s.bin = 0;
    s.need = 1;
  }
  u64 total;
  const u64 incl = one_block::block_inclusive_scan(s.scratch, sum, total);
  u64 run = incl - sum;
  if (run < need && incl >= need) {
    for (int j = 0; j < per && top - j >= 0; ++j) {
      const u64 c = val(top - j);
      if (run + c >= need) {
        s.bin = static_cast<unsigned>(top - j);
        s.need = need - run;
        break;
      }
      run += c;
    }
  }
  __syncthreads();
}

// The weight rule of a row, relative to its largest logit (found by the scan); s.table must be loaded.
__device__ inline Weigh row_weigh(const PassShared& s, const Job& job, const RowState& st) {
  return Weigh{key_value(static_cast<unsigned>(st.best >> 32)), job.scale, job.bits, s.table};
}

}  // namespace ignis::cuda::multi_pass
