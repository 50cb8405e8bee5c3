// Top-p masks of 16-bit logits in three kernels over a per-row histogram of the 65536 possible values:
//  1. count: every token adds one to the bin of its order key (the 16-bit pattern, ordered as the
//     values are), from blocks spread over the row;
//  2. cut (one block a row): the row max is the highest non-empty bin; the weight of a bin is its
//     count times the fixed-point weight of its value, so one scan from the highest bin finds the
//     value where the rank-order mass reaches the target, and how many of the tokens of that value
//     (in index order, as the composite order of sampling.cu ranks ties) the prefix still needs;
//     a pass over the row then finds the index of the last of them;
//  3. mask: tokens above the cut value are kept, those equal to it up to that index, all others
//     become -inf.
// The weights are the integers of src/ops/sampling_rule.h and sums of integers do not depend on
// their order, so the masks equal those of the multi-pass kernels and of the CPU path exactly.
#include "cuda/ops/top_p_narrow.h"

#include <algorithm>
#include <climits>

#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/scratch.cuh"
#include "cuda/ops/sampling_block.cuh"

namespace ignis::cuda {
namespace {

namespace rule = ignis::sampling;
using u64 = unsigned long long;
using u16 = unsigned short;

constexpr int kBins = 1 << 16;
constexpr int kMaxRows = 256;  // 64 MB of histograms
constexpr int kThreads = 256;  // count and mask kernels
constexpr int kUnroll = 8;     // loads a thread has in flight there
constexpr int kCutThreads = 1024;
constexpr int kBinsPerThread = kBins / kCutThreads;

struct Bf16Bits {
  static constexpr u16 kNegInf = 0xff80;
  __device__ static float value(u16 raw) { return __uint_as_float(static_cast<unsigned>(raw) << 16); }
};
struct F16Bits {
  static constexpr u16 kNegInf = 0xfc00;
  __device__ static float value(u16 raw) { return __half2float(__ushort_as_half(raw)); }
};

// The 16-bit counterpart of rule::order_key: keys compare as the values do, -0 shares +0's key.
__device__ __forceinline__ unsigned order_key16(u16 raw) {
  if (raw == 0x8000) raw = 0;
  return (raw & 0x8000) ? (~raw & 0xffffu) : (raw | 0x8000u);
}
template <class Bits>
__device__ __forceinline__ float key_value16(unsigned key) {
  return Bits::value(static_cast<u16>((key & 0x8000u) ? (key & 0x7fffu) : (~key & 0xffffu)));
}

// What the mask kernel needs of a row.
struct RowCut {
  unsigned key;  // tokens with a larger key are kept
  int last;      // tokens with this key are kept up to this index
  int keep_all;  // no finite logit (or a NaN max): the row is copied unchanged, as the other paths do
};

struct Table {
  std::uint64_t entries[rule::kExpTableSize];
};

struct MaxU32 {
  __device__ unsigned operator()(unsigned a, unsigned b) const { return a > b ? a : b; }
};

// hist: [rows, kBins], zeroed by the caller.
__global__ void __launch_bounds__(kThreads) count_values_kernel(const u16* x, int vocab, int slice, unsigned* hist) {
  const u16* row = x + static_cast<long long>(blockIdx.y) * vocab;
  unsigned* h = hist + static_cast<long long>(blockIdx.y) * kBins;
  const int lo = static_cast<int>(blockIdx.x) * slice, hi = min(lo + slice, vocab);
  for (int base = lo + static_cast<int>(threadIdx.x); base < hi; base += kThreads * kUnroll) {
    u16 v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int i = base + j * kThreads;
      v[j] = i < hi ? row[i] : u16{0};
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j)
      if (base + j * kThreads < hi) atomicAdd(&h[order_key16(v[j])], 1u);
  }
}

// One block a row. Thread t owns the bins [kBins - (t + 1) * kBinsPerThread, kBins - t * kBinsPerThread),
// so that an inclusive scan in thread order runs from the highest value down.
template <class Bits>
__global__ void __launch_bounds__(kCutThreads) find_cut_kernel(const u16* x, int vocab, const unsigned* hist,
                                                               RowCut* cuts, u64 p_fixed, int bits,
                                                               const __grid_constant__ Table table) {
  __shared__ std::uint64_t table_s[rule::kExpTableSize];
  __shared__ unsigned max_scratch[32];
  __shared__ u64 scan[32];
  __shared__ unsigned cut_key, cut_count, cut_needed;
  for (int j = threadIdx.x; j < rule::kExpTableSize; j += blockDim.x) table_s[j] = table.entries[j];
  const int row = static_cast<int>(blockIdx.x);
  const u16* xr = x + static_cast<long long>(row) * vocab;
  const unsigned* h = hist + static_cast<long long>(row) * kBins;
  const int top = kBins - 1 - static_cast<int>(threadIdx.x) * kBinsPerThread;

  unsigned highest = 0;  // key + 1 of this thread's highest non-empty bin; 0: none
  for (int j = 0; j < kBinsPerThread && highest == 0; ++j)
    if (h[top - j] != 0) highest = static_cast<unsigned>(top - j) + 1;
  highest = block_reduce(highest, MaxU32{}, max_scratch);  // vocab >= 1: some bin is non-empty
  const one_block::Weigh weigh{key_value16<Bits>(highest - 1), rule::kLog2e, bits, table_s};

  u64 mass = 0;  // of this thread's bins
  for (int j = 0; j < kBinsPerThread; ++j) {
    const unsigned count = h[top - j];
    if (count != 0) mass += count * weigh(key_value16<Bits>(static_cast<unsigned>(top - j)));
  }
  u64 total;
  const u64 incl = one_block::block_inclusive_scan(scan, mass, total);
  if (total == 0) {
    if (threadIdx.x == 0) cuts[row] = {0, 0, 1};
    return;
  }
  const u64 target = rule::top_p_target(total, p_fixed);
  u64 run = incl - mass;
  if (run < target && incl >= target) {  // the one thread whose bins hold the cut
    for (int j = 0; j < kBinsPerThread; ++j) {
      const unsigned key = static_cast<unsigned>(top - j), count = h[key];
      if (count == 0) continue;
      const u64 w = weigh(key_value16<Bits>(key));
      if (run + count * w >= target) {  // w > 0 here: a bin of weight 0 cannot reach the target
        cut_key = key;
        cut_count = count;
        cut_needed = static_cast<unsigned>((target - run + w - 1) / w);
        break;
      }
      run += count * w;
    }
  }
  __syncthreads();
  const unsigned key = cut_key, needed = cut_needed;
  if (needed == cut_count) {  // every token of the cut value is kept
    if (threadIdx.x == 0) cuts[row] = {key, INT_MAX, 0};
    return;
  }
  // The index of the needed-th token of the cut value: each thread counts them in its own
  // contiguous segment, a scan places the segments, and the one holding it walks it again.
  const int segment = (vocab + kCutThreads - 1) / kCutThreads;
  const int lo = min(vocab, static_cast<int>(threadIdx.x) * segment), hi = min(vocab, lo + segment);
  unsigned ties = 0;
  for (int i = lo; i < hi; ++i) ties += order_key16(xr[i]) == key;
  u64 unused;
  const u64 ties_incl = one_block::block_inclusive_scan(scan, u64{ties}, unused);
  u64 before = ties_incl - ties;
  if (before < needed && ties_incl >= needed)
    for (int i = lo; i < hi; ++i)
      if (order_key16(xr[i]) == key && ++before == needed) {
        cuts[row] = {key, i, 0};
        break;
      }
}

template <class Bits>
__global__ void __launch_bounds__(kThreads) mask_kernel(const u16* x, u16* y, int vocab, int slice,
                                                        const RowCut* cuts) {
  const long long offset = static_cast<long long>(blockIdx.y) * vocab;
  const RowCut cut = cuts[blockIdx.y];
  const int lo = static_cast<int>(blockIdx.x) * slice, hi = min(lo + slice, vocab);
  for (int base = lo + static_cast<int>(threadIdx.x); base < hi; base += kThreads * kUnroll) {
    u16 v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int i = base + j * kThreads;
      v[j] = i < hi ? x[offset + i] : u16{0};
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int i = base + j * kThreads;
      if (i >= hi) continue;
      const unsigned k = order_key16(v[j]);
      const bool keep = cut.keep_all || k > cut.key || (k == cut.key && i <= cut.last);
      y[offset + i] = keep ? v[j] : Bits::kNegInf;
    }
  }
}

template <class Bits>
void launch(const Tensor& logits, std::uint64_t p_fixed, const Tensor& out, Stream stream) {
  const long long rows = logits.size(0), vocab = logits.size(1);
  // Blocks of the count and mask kernels: about four an SM over all rows, whole unrolled steps.
  const long long step = kThreads * kUnroll;
  const long long want = ceil_div(4LL * sm_count(), rows), most = ceil_div(vocab, step);
  const long long per_row = std::max(1LL, std::min(want, most));
  const int slice = static_cast<int>(ceil_div(ceil_div(vocab, per_row), step) * step);
  const dim3 grid(ceil_div(vocab, slice), static_cast<unsigned>(rows));

  const std::size_t hist_bytes = align_up(static_cast<std::size_t>(rows) * kBins * sizeof(unsigned));
  Scratch scratch(hist_bytes + align_up(static_cast<std::size_t>(rows) * sizeof(RowCut)), stream);
  unsigned* hist = scratch.at<unsigned>(0);
  RowCut* cuts = scratch.at<RowCut>(hist_bytes);
  IGNIS_CUDA_CHECK(cudaMemsetAsync(hist, 0, hist_bytes, to_cuda(stream)));
  Table table;
  std::copy_n(rule::exp2_table(), rule::kExpTableSize, table.entries);

  const u16* x = static_cast<const u16*>(logits.data());
  count_values_kernel<<<grid, kThreads, 0, to_cuda(stream)>>>(x, static_cast<int>(vocab), slice, hist);
  IGNIS_CHECK_LAUNCH();
  find_cut_kernel<Bits><<<static_cast<unsigned>(rows), kCutThreads, 0, to_cuda(stream)>>>(
      x, static_cast<int>(vocab), hist, cuts, p_fixed, rule::weight_bits(vocab), table);
  IGNIS_CHECK_LAUNCH();
  mask_kernel<Bits><<<grid, kThreads, 0, to_cuda(stream)>>>(x, static_cast<u16*>(out.data()), static_cast<int>(vocab),
                                                           slice, cuts);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

bool top_p_mask_narrow_fits(std::int64_t rows) { return rows <= kMaxRows; }

void top_p_mask_narrow(const Tensor& logits, std::uint64_t p_fixed, const Tensor& out, Stream stream) {
  if (logits.dtype() == DType::bf16) return launch<Bf16Bits>(logits, p_fixed, out, stream);
  return launch<F16Bits>(logits, p_fixed, out, stream);
}

}  // namespace ignis::cuda
