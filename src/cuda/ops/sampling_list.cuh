#pragma once
// The last block's work on a row's list of candidate tokens (sampling.cu's compact kernel): radix
// selection over the listed composites, weighted or counted, and for top-k samples of short lists
// a sort in shared memory.
#include "cuda/common/reduce.cuh"
#include "cuda/ops/sampling_pass.cuh"

namespace ignis::cuda::multi_pass {

// Among the listed tokens with weight(j, c) > 0 (c = list[j]), ranked by order(c) from the largest (orders are
// distinct), the order of the first at which the running weight reaches need (need <= the total).
// Radix passes over the bits in which those orders differ; stops once a digit leaves one token. Each
// digit starts at the highest bit below the last that varies over the list: the bits between a 16-bit
// logit's key and the token index, and the index's high bits, are the same for every token.
// list: [m].
template <class Order, class Weight>
__device__ u64 list_select(PassShared& s, const u64* list, int m, Order order, Weight weight, u64 need) {
  u64 all = ~0ull, any = 0;
  for (int j = threadIdx.x; j < m; j += blockDim.x) {
    const u64 c = list[j];
    if (weight(j, c) != 0) {
      all &= order(c);
      any |= order(c);
    }
  }
  all = block_reduce(all, BitAnd{}, s.scratch);
  any = block_reduce(any, BitOr{}, s.scratch);
  const u64 vary = all ^ any;
  if (vary == 0) return any;
  int top = 64;
  u64 fixed = 0, prefix = 0;
  for (;;) {
    const u64 below = top == 64 ? ~0ull : (u64{1} << top) - 1;
    const int highest = 64 - __clzll(static_cast<long long>(vary & below));  // > 0: orders are distinct
    const u64 same = below & (highest == 64 ? 0 : ~((u64{1} << highest) - 1));  // bits [highest, top)
    fixed |= same;
    prefix |= any & same;
    top = highest;
    const int shift = top > kSelBits ? top - kSelBits : 0;
    const u64 digit = (u64{1} << (top - shift)) - 1;
    for (int b = threadIdx.x; b < kSelBins; b += blockDim.x) {
      s.sel_weight[b] = 0;
      s.sel_count[b] = 0;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
      const u64 c = list[j];
      const u64 w = weight(j, c);
      const u64 o = order(c);
      if (w != 0 && (o & fixed) == prefix) {
        const unsigned b = static_cast<unsigned>((o >> shift) & digit);
        atomicAdd(&s.sel_weight[b], w);
        atomicAdd(&s.sel_count[b], 1u);
      }
    }
    __syncthreads();
    pick_bin(s, kSelBins, [&](int b) { return s.sel_weight[b]; }, need);
    const unsigned bin = s.bin, count = s.sel_count[bin];
    need = s.need;
    prefix |= u64{bin} << shift;
    fixed |= digit << shift;
    top = shift;
    __syncthreads();  // s is rewritten below or by the next pass
    if (shift == 0) return prefix;
    if (count == 1) {
      for (int j = threadIdx.x; j < m; j += blockDim.x) {
        const u64 c = list[j];
        if (weight(j, c) != 0 && (order(c) & fixed) == prefix) s.value = order(c);
      }
      __syncthreads();
      const u64 found = s.value;
      __syncthreads();
      return found;
    }
  }
}

struct ByRank {
  __device__ u64 operator()(u64 c) const { return c; }
};
struct ByIndex {  // the lower index ranks first
  __device__ u64 operator()(u64 c) const { return c & 0xffffffffu; }
};
struct One {
  __device__ u64 operator()(int, u64) const { return 1; }
};
// The weight of listed token j (composite c) at or above `cut`, as the last block of compact_kernel
// stored it: the radix passes over the list read it instead of computing it (the fixed-point weight)
// again in each pass. Stored by every block as it appended (most warps weighing a token), it cost
// top-p masks 6-16% at 256-4096 rows of 32000 (H200, session 29).
// weights: [list_cap], one row's.
struct ListedWeight {
  const u64* weights;
  u64 cut;
  __device__ u64 operator()(int j, u64 c) const { return c >= cut ? weights[j] : 0; }
};
// list: [m].
template <class F>
__device__ u64 list_sum(PassShared& s, const u64* list, int m, F weight) {
  u64 sum = 0;
  for (int j = threadIdx.x; j < m; j += blockDim.x) sum += weight(j, list[j]);
  return block_reduce(sum, Sum{}, s.scratch);
}

// A top-k sample's list of at most this many tokens is sorted in shared memory (PassShared::weights
// holds it) instead of being cut by radix passes. 16-bit logits tie within a bucket, so their radix
// passes run on through the index bits: sorting up to 1024 tokens took 5-9 us off 1- and 64-row
// bf16 calls (H200, session 29). f32 keys are nearly unique and the passes stop after about three
// digits; sorting (~800 tokens) cost 64 x 128256 f32 3.5 us, so f32 lists sort only when short.
constexpr int kSortedList = kTopBins / 2;
constexpr int kSortedListF32 = 256;

// Sorts the n pairs (n a power of two) by key, largest first. All threads call; ends at a barrier.
// key, val: [n].
__device__ inline void sort_pairs_descending(u64* key, u64* val, int n) {
  for (int size = 2; size <= n; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < n / 2; t += blockDim.x) {
        const int i = 2 * t - (t & (stride - 1)), j = i + stride;
        const bool descending = (i & size) == 0;  // the direction of this run (the last run: all of it)
        if ((key[i] < key[j]) == descending) {
          const u64 k = key[i], v = val[i];
          key[i] = key[j];
          val[i] = val[j];
          key[j] = k;
          val[j] = v;
        }
      }
      __syncthreads();
    }
}

// The first position p < n at which the running sum of val reaches need (need <= the sum of all n),
// and that running sum: pick_bin with bin b standing for position n - 1 - b, so that its scan from
// the highest bin down walks the positions upwards. All threads call; ends at a barrier.
// val: [n].
__device__ inline int first_reaching(PassShared& s, const u64* val, int n, u64 need, u64& reached) {
  pick_bin(s, n, [&](int b) { return val[n - 1 - b]; }, need);
  const int found = n - 1 - static_cast<int>(s.bin);
  reached = need - s.need + val[found];  // s.need: what position `found` still had to supply
  __syncthreads();  // s.bin and s.need may be rewritten next
  return found;
}

// sample_from_list for m <= kSortedList (m >= job.k): the list sorted by rank makes the top-k cut a
// position and the top-p cut a prefix sum; the kept tokens sorted by index then give the draw.
// list, weights: [m].
__device__ inline int sample_from_sorted_list(PassShared& s, const Job& job, const RowState& st, const u64* list,
                                              const u64* weights, int m, int row) {
  u64* key = s.weights;               // [kSortedList]
  u64* val = s.weights + kSortedList;  // [kSortedList]
  int n = 1;
  while (n < m) n <<= 1;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    key[j] = j < m ? list[j] : 0;  // composites are never 0: padding sorts last
    val[j] = j < m ? weights[j] : 0;
  }
  __syncthreads();
  sort_pairs_descending(key, val, n);
  const int k = static_cast<int>(job.k);
  u64 total = 0;
  for (int j = threadIdx.x; j < k; j += blockDim.x) total += val[j];
  total = block_reduce(total, Sum{}, s.scratch);
  int last = k - 1;  // the last kept rank
  if (job.p_fixed < rule::kTopPOff && total > 0)
    last = first_reaching(s, val, k, rule::top_p_target(total, job.p_fixed), total);
  if (total == 0) return composite_index(st.best);  // a row without a finite logit
  const u64 need = rule::draw_threshold(rule::random_bits(job.plan.seed, job.plan.step, row), total) + 1;
  // The kept tokens by index (the composite's halves swapped: ~index first), the rest as padding.
  int kept = 1;
  while (kept < last + 1) kept <<= 1;
  for (int j = threadIdx.x; j < kept; j += blockDim.x) {
    const bool keep = j <= last;
    key[j] = keep ? (key[j] << 32) | (key[j] >> 32) : 0;
    val[j] = keep ? val[j] : 0;
  }
  __syncthreads();
  sort_pairs_descending(key, val, kept);
  u64 reached;
  const int first = first_reaching(s, val, kept, need, reached);
  return static_cast<int>(0xffffffffu - static_cast<unsigned>(key[first] >> 32));
}

// The last block's part of a top-k sample: every token of the top-k cut is in the list.
// list, weights: [m].
__device__ inline int sample_from_list(PassShared& s, const Job& job, const RowState& st, const u64* list,
                                       const u64* weights, int m, int row) {
  u64 cut = list_select(s, list, m, ByRank{}, One{}, static_cast<u64>(job.k));
  u64 total = list_sum(s, list, m, ListedWeight{weights, cut});
  if (job.p_fixed < rule::kTopPOff && total > 0) {
    cut = list_select(s, list, m, ByRank{}, ListedWeight{weights, cut}, rule::top_p_target(total, job.p_fixed));
    total = list_sum(s, list, m, ListedWeight{weights, cut});
  }
  if (total == 0) return composite_index(st.best);  // a row without a finite logit
  const u64 threshold = rule::draw_threshold(rule::random_bits(job.plan.seed, job.plan.step, row), total);
  const u64 first = list_select(s, list, m, ByIndex{}, ListedWeight{weights, cut}, threshold + 1);
  return static_cast<int>(0xffffffffu - static_cast<unsigned>(first));
}

}  // namespace ignis::cuda::multi_pass
