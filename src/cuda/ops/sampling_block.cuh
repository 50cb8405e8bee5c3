#pragma once
// One thread block per row: every pass reads the whole row, spread across the block. Rows of any
// length and any k work without sorting and without workspace, at the cost of ~13 passes over the
// row; the multi-block kernels (sampling.cu) fall back to these for rows whose candidate bucket
// does not fit their workspace (e.g. a vocabulary of equal logits).
//  - top-k: radix select of the k-th largest order key (four 8-bit histogram passes in shared
//    memory, native atomics on 16-bit limbs), then an index-order block scan over the tokens equal
//    to it keeps exactly the lowest-index ones still needed.
//  - top-p: the same radix select with a histogram weighted by the fixed-point token weights of
//    src/ops/sampling_rule.h, whose integer sums do not depend on the order of summation.
//  - sample: an index-order block prefix sum of the kept weights finds the first token whose
//    cumulative weight exceeds the drawn threshold.
#include "cuda/common/convert.cuh"
#include "cuda/common/reduce.cuh"
#include "ops/sampling_rule.h"

namespace ignis::cuda::one_block {

namespace rule = ignis::sampling;
using u64 = unsigned long long;

constexpr int kRadixBits = 8;
constexpr int kBins = 1 << kRadixBits;
constexpr int kItems = 8;            // consecutive tokens per thread in index-order scans
constexpr int kLimbs = 4;         // histogram_pass sums 64-bit values as four 16-bit limbs

struct Shared {
  u64 hist[kBins];
  unsigned limbs[kLimbs][kBins];  // histogram_pass's counters
  u64 scan[32];
  double table[rule::kExpTableSize];
  unsigned bin;
  u64 need;
  int found;
};

struct MaxU64 {
  __device__ __forceinline__ u64 operator()(u64 a, u64 b) const { return a > b ? a : b; }
};

// Survivors of a cut at (key, last): keys above `key`, and tokens equal to it up to index `last`.
// Cut{} keeps every token.
struct Cut {
  bool on;
  unsigned key;
  int last;
  __device__ bool keeps(int i, unsigned k) const { return !on || k > key || (k == key && i <= last); }
};

struct Weigh {
  float max;
  double scale;
  int bits;
  const double* table;
  __device__ u64 operator()(float v) const {
    return rule::weight_from_exponent(rule::weight_exponent(max, v, scale), table, bits);
  }
};

// Value functors see (index, value, order key) and return what a pass sums.
struct CountAll {
  __device__ u64 operator()(int, float, unsigned) const { return 1; }
};
struct CountEqual {
  unsigned key;
  __device__ u64 operator()(int, float, unsigned k) const { return k == key ? 1 : 0; }
};
// Weight of the tokens both cuts keep; with `one_key`, only of those whose key is `key`.
struct KeptMass {
  Weigh weigh;
  Cut k_cut;
  Cut p_cut;
  bool one_key;
  unsigned key;
  __device__ u64 operator()(int i, float v, unsigned k) const {
    if (!k_cut.keeps(i, k) || !p_cut.keeps(i, k) || (one_key && k != key)) return 0;
    return weigh(v);
  }
};

// 64-bit histogram sums as four 16-bit limbs in 32-bit shared counters: native shared atomics,
// whose conflicts (heavy bins are the rule for logits) the hardware resolves, folded into the 64-bit
// sums every kLimbSpan tokens of a block, before a counter can pass 32 bits. Warp-aggregated 64-bit
// adds, which group lanes by bin with __match_any_sync, made these passes compute-bound: 39% of
// the multi-block weigh pass's instructions were branches, at 14.6 active threads a warp (ncu, H200,
// session 28); limbs ran it 5.5x faster.
constexpr int kLimbSpan = 65536;

// limbs: [kLimbs][Bins].
template <int Bins>
__device__ __forceinline__ void add_to_limbs(unsigned (&limbs)[kLimbs][Bins], unsigned bin, u64 v) {
#pragma unroll
  for (int j = 0; j < kLimbs; ++j) {
    const unsigned part = static_cast<unsigned>(v >> (16 * j)) & 0xffffu;
    if (part != 0) atomicAdd(&limbs[j][bin], part);
  }
}

// Adds each bin's limbs into sums[bin] and zeroes them. Call between barriers, every thread.
// limbs: [kLimbs][Bins]; sums: [Bins].
template <int Bins>
__device__ void fold_limbs(unsigned (&limbs)[kLimbs][Bins], u64* sums) {
  for (int b = threadIdx.x; b < Bins; b += blockDim.x) {
    u64 sum = 0;
    for (int j = 0; j < kLimbs; ++j) {
      sum += u64{limbs[j][b]} << (16 * j);
      limbs[j][b] = 0;
    }
    sums[b] += sum;
  }
}

// Histogram over the next digit (at `shift`) of the tokens whose key matches `prefix` under `mask`,
// added to s.hist. Every thread must call; ends at a barrier.
// x: [n], one row.
template <class T, class Value>
__device__ void histogram_pass(Shared& s, const T* x, int n, Value value, unsigned prefix, unsigned mask, int shift) {
  for (int lo = 0; lo < n; lo += kLimbSpan) {
    const int hi = min(n, lo + kLimbSpan);
    for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += blockDim.x) {
      const float f = to_float(x[i]);
      const unsigned key = rule::order_key(f);
      if ((key & mask) != prefix) continue;
      add_to_limbs(s.limbs, (key >> shift) & (kBins - 1), value(i, f, key));
    }
    __syncthreads();
    fold_limbs(s.limbs, s.hist);
    __syncthreads();
  }
}

// Warp 0: the highest bin b with sum(hist[> b]) < need <= sum(hist[>= b]); stores b and the
// part of `need` left for bin b.
__device__ inline void pick_bin(Shared& s, u64 need) {
  constexpr int kPerLane = kBins / 32;
  const int lane = threadIdx.x;
  const int top = kBins - 1 - lane * kPerLane;  // lane 0 holds the highest bins
  u64 sum = 0;
  for (int j = 0; j < kPerLane; ++j) sum += s.hist[top - j];
  u64 incl = sum;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 t = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += t;
  }
  const unsigned reached = __ballot_sync(kFullMask, incl >= need);
  const int owner = reached ? __ffs(reached) - 1 : 31;  // need never exceeds the total; 31 stays in range
  if (lane == owner) {
    u64 above = incl - sum;
    int bin = top - (kPerLane - 1);
    for (int j = 0; j < kPerLane; ++j) {
      const u64 c = s.hist[top - j];
      if (above + c >= need) {
        bin = top - j;
        break;
      }
      above += c;
    }
    s.bin = static_cast<unsigned>(bin);
    s.need = need > above ? need - above : 1;
  }
}

struct Selection {
  unsigned key;  // the key of the token at which the running sum (in rank order) reaches `need`
  u64 need;      // how much of it must still come from tokens with exactly that key
};

// Radix select in rank order (larger key first) of the token where the sum of value() reaches need.
// x: [n], one row.
template <class T, class Value>
__device__ Selection radix_select(Shared& s, const T* x, int n, Value value, u64 need) {
  unsigned prefix = 0, mask = 0;
  for (int shift = 32 - kRadixBits; shift >= 0; shift -= kRadixBits) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
      s.hist[b] = 0;
      for (int j = 0; j < kLimbs; ++j) s.limbs[j][b] = 0;
    }
    __syncthreads();
    histogram_pass(s, x, n, value, prefix, mask, shift);
    __syncthreads();
    if (threadIdx.x < 32) pick_bin(s, need);
    __syncthreads();
    prefix |= s.bin << shift;
    mask |= static_cast<unsigned>(kBins - 1) << shift;
    need = s.need;
    __syncthreads();
  }
  return {prefix, need};
}

// Inclusive prefix sum over the block in thread order; `total` receives the block's sum.
// scan: [32], a slot a warp.
__device__ inline u64 block_inclusive_scan(u64* scan, u64 v, u64& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 t = __shfl_up_sync(kFullMask, v, o);
    if (lane >= o) v += t;
  }
  __syncthreads();  // s.scan may still be read by the previous scan
  if (lane == 31) scan[warp] = v;
  __syncthreads();
  if (warp == 0) {
    u64 w = lane < warps ? scan[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const u64 t = __shfl_up_sync(kFullMask, w, o);
      if (lane >= o) w += t;
    }
    if (lane < warps) scan[lane] = w;
  }
  __syncthreads();
  total = scan[warps - 1];
  return v + (warp > 0 ? scan[warp - 1] : 0);
}

// The first index whose inclusive index-order sum of value() reaches need (n - 1 if none does).
// x: [n], one row.
template <class T, class Value>
__device__ int find_first_reaching(Shared& s, const T* x, int n, Value value, u64 need) {
  if (threadIdx.x == 0) s.found = n - 1;
  const int tile = blockDim.x * kItems;
  u64 carry = 0;
  for (int base = 0; base < n; base += tile) {
    const int first = base + threadIdx.x * kItems;
    u64 v[kItems];
    u64 sum = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int i = first + j;
      v[j] = 0;
      if (i < n) {
        const float f = to_float(x[i]);
        v[j] = value(i, f, rule::order_key(f));
      }
      sum += v[j];
    }
    u64 total;
    const u64 incl = block_inclusive_scan(s.scan, sum, total);
    u64 before = carry + incl - sum;
    if (before < need && before + sum >= need) {
      for (int j = 0; j < kItems; ++j) {
        before += v[j];
        if (before >= need) {
          s.found = first + j;
          break;
        }
      }
    }
    carry += total;
    if (carry >= need) break;  // carry is the same in every thread
  }
  __syncthreads();
  const int found = s.found;
  __syncthreads();  // the next call rewrites s.found
  return found;
}

// Largest key, lowest index first among equals.
// x: [n], one row.
template <class T>
__device__ int row_argmax(Shared& s, const T* x, int n) {
  u64 best = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const u64 packed = (u64{rule::order_key(to_float(x[i]))} << 32) | (0xffffffffu - static_cast<unsigned>(i));
    best = best > packed ? best : packed;
  }
  best = block_reduce(best, MaxU64{}, s.scan);
  return static_cast<int>(0xffffffffu - static_cast<unsigned>(best & 0xffffffffu));
}

// x: [n], one row.
template <class T>
__device__ u64 kept_total(Shared& s, const T* x, int n, const KeptMass& mass) {
  u64 sum = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float f = to_float(x[i]);
    sum += mass(i, f, rule::order_key(f));
  }
  return block_reduce(sum, Sum{}, s.scan);
}

// table: [rule::kExpTableSize].
__device__ inline void copy_table(Shared& s, const double* table) {
  for (int j = threadIdx.x; j < rule::kExpTableSize; j += blockDim.x) s.table[j] = table[j];
  __syncthreads();
}

// x: [n], one row.
template <class T>
__device__ Cut top_k_cut(Shared& s, const T* x, int n, int k) {
  const Selection sel = radix_select(s, x, n, CountAll{}, static_cast<u64>(k));
  return {true, sel.key, find_first_reaching(s, x, n, CountEqual{sel.key}, sel.need)};
}

// The shortest rank-order prefix of the k_cut survivors whose weight reaches the top-p target.
// x: [n], one row.
template <class T>
__device__ Cut top_p_cut(Shared& s, const T* x, int n, const Weigh& weigh, Cut k_cut, u64 total, u64 p_fixed) {
  const u64 target = rule::top_p_target(total, p_fixed);
  const Selection sel = radix_select(s, x, n, KeptMass{weigh, k_cut, Cut{}, false, 0}, target);
  return {true, sel.key, find_first_reaching(s, x, n, KeptMass{weigh, k_cut, Cut{}, true, sel.key}, sel.need)};
}

// Every pass that reads the row has ended at a barrier, so y may alias x.
// x, y: [n], one row.
template <class T>
__device__ void write_mask(const T* x, T* y, int n, Cut cut) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const T v = x[i];
    y[i] = cut.keeps(i, rule::order_key(to_float(v))) ? v : from_float<T>(-INFINITY);
  }
}

// The bodies of the one-block kernels, for one row x of n tokens (out row y may alias x).
// x, y: [n].
template <class T>
__device__ void top_k_row(Shared& s, const T* x, T* y, int n, int k) {
  write_mask(x, y, n, top_k_cut(s, x, n, k));
}

// x, y: [n]; table: [rule::kExpTableSize].
template <class T>
__device__ void top_p_row(Shared& s, const T* x, T* y, int n, u64 p_fixed, int bits, const double* table) {
  copy_table(s, table);
  const Weigh weigh{to_float(x[row_argmax(s, x, n)]), rule::kLog2e, bits, s.table};
  const u64 total = kept_total(s, x, n, KeptMass{weigh, Cut{}, Cut{}, false, 0});
  const Cut cut = total > 0 ? top_p_cut(s, x, n, weigh, Cut{}, total, p_fixed) : Cut{};
  write_mask(x, y, n, cut);
}

// x: [n], one row; table: [rule::kExpTableSize].
template <class T>
__device__ int sample_row(Shared& s, const T* x, int n, const rule::Plan& plan, u64 row, const double* table) {
  const int best = row_argmax(s, x, n);
  if (plan.greedy) return best;
  copy_table(s, table);
  const Cut k_cut = plan.top_k > 0 ? top_k_cut(s, x, n, static_cast<int>(plan.top_k)) : Cut{};
  const Weigh weigh{to_float(x[best]), plan.scale, plan.bits, s.table};
  u64 total = kept_total(s, x, n, KeptMass{weigh, k_cut, Cut{}, false, 0});
  Cut p_cut = Cut{};
  if (plan.p_fixed < rule::kTopPOff && total > 0) {
    p_cut = top_p_cut(s, x, n, weigh, k_cut, total, plan.p_fixed);
    total = kept_total(s, x, n, KeptMass{weigh, k_cut, p_cut, false, 0});
  }
  if (total == 0) return best;  // a row without a finite logit
  const u64 threshold = rule::draw_threshold(rule::random_bits(plan.seed, plan.step, row), total);
  return find_first_reaching(s, x, n, KeptMass{weigh, k_cut, p_cut, false, 0}, threshold + 1);
}

}  // namespace ignis::cuda::one_block
