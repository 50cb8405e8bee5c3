// Top-p masks of 16-bit logits over a per-row histogram of the 65536 possible values, four kernels:
//  1. count: every token adds one to the bin of its order key (the 16-bit pattern, ordered as the
//     values are), through a shared-memory histogram a block, and the row's largest key;
//  2. cut (64 blocks a row, 1024 bins each): the weight of a bin is its count times the fixed-point
//     weight of its value, so a scan from the highest bin finds the value where the rank-order mass
//     reaches the target, and how many of the tokens of that value the prefix still needs (ties rank
//     in index order, as the composite order of sampling.cu does);
//  3. tie count: the tokens of the cut value in each slice of the row;
//  4. mask: tokens above the cut value are kept, those equal to it while their index-order rank is
//     below the needed count, all others become -inf; only the slice where that rank runs out ranks
//     its tokens one by one.
// The weights are the integers of src/ops/sampling_rule.h and sums of integers do not depend on
// their order, so the masks equal those of the multi-pass kernels and of the CPU path exactly.
#include "cuda/ops/top_p_narrow.h"

#include <algorithm>
#include <climits>

#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/sampling_block.cuh"

namespace ignis::cuda {
namespace {

namespace rule = ignis::sampling;
using u64 = unsigned long long;
using u16 = unsigned short;

constexpr int kBins = 1 << 16;
constexpr int kMaxRows = 64;  // 16 MB of histograms
constexpr int kThreads = 256;  // tie-count and mask kernels
constexpr int kUnroll = 8;     // loads a thread has in flight in the count and mask kernels
constexpr int kCountThreads = 512;
// Tokens a block of the count kernel (16-bit counts allow 65535): long slices keep the global
// atomics few (a bin gets at most one a block), short rows get a few blocks still.
constexpr int kCountSlice = 16384;
constexpr int kShortCountSlice = 4096;
constexpr int kCutThreads = 1024;  // bins a block of the cut kernel weighs, one a thread
constexpr int kCutBlocks = kBins / kCutThreads;

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

// What the tie-count and mask kernels need of a row.
struct RowCut {
  unsigned key;     // tokens with a larger key are kept
  unsigned needed;  // and the first `needed` tokens (in index order) with this key
  int keep_all;     // no finite logit (or a NaN max): the row is copied unchanged, as the other paths do
};

struct Table {
  double entries[rule::kExpTableSize];
};

struct MaxU32 {
  __device__ unsigned operator()(unsigned a, unsigned b) const { return a > b ? a : b; }
};

// A block counts `slice` tokens into a shared histogram of 16-bit counts (two a word: a slice
// cannot carry one count into its neighbour), then adds its non-empty bins to the row's, and its
// largest key + 1 to the row's maximum. hist: [rows, kBins], top: [rows], both zeroed.
// x: [rows, vocab].
__global__ void __launch_bounds__(kCountThreads) count_values_kernel(const u16* x, int vocab, int slice,
                                                                     unsigned* hist, unsigned* top) {
  __shared__ unsigned max_scratch[32];
  extern __shared__ uint4 local_words4[];  // [kBins / 2] words
  unsigned* local = reinterpret_cast<unsigned*>(local_words4);
  for (int j = threadIdx.x; j < kBins / 8; j += kCountThreads) local_words4[j] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  const u16* row = x + static_cast<long long>(blockIdx.y) * vocab;
  const int lo = static_cast<int>(blockIdx.x) * slice, hi = min(lo + slice, vocab);
  unsigned highest = 0;
  for (int base = lo + static_cast<int>(threadIdx.x); base < hi; base += kCountThreads * kUnroll) {
    u16 v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int i = base + j * kCountThreads;
      v[j] = i < hi ? row[i] : u16{0};
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      if (base + j * kCountThreads >= hi) continue;
      const unsigned key = order_key16(v[j]);
      atomicAdd(&local[key >> 1], 1u << ((key & 1) * 16));
      highest = max(highest, key + 1);
    }
  }
  highest = block_reduce(highest, MaxU32{}, max_scratch);  // its barriers also order the counts
  if (threadIdx.x == 0) atomicMax(&top[blockIdx.y], highest);
  unsigned* h = hist + static_cast<long long>(blockIdx.y) * kBins;
  for (int j = threadIdx.x; j < kBins / 8; j += kCountThreads) {
    const uint4 w = local_words4[j];
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int bin = (4 * j + q) * 2;
      if (words[q] & 0xffffu) atomicAdd(&h[bin], words[q] & 0xffffu);
      if (words[q] >> 16) atomicAdd(&h[bin + 1], words[q] >> 16);
    }
  }
}

// Grid (kCutBlocks, rows): a block weighs kCutThreads neighbouring bins, one a thread (a bin's mass is
// its count times the fixed-point weight of its value), and stores their sum. The last block of the
// row to arrive finds the block where the rank-order mass (highest bin first) reaches the target,
// weighs that block's bins again and scans them. One block a row doing all 65536 bins took 49 us
// of the 66 us of a 1 x 32000 bf16 mask (ncu, H200, session 29): a latency-bound chain on one SM.
// hist: [rows, kBins]; top_keys, arrived (zeroed), cuts: [rows]; block_mass: [rows, kCutBlocks].
template <class Bits>
__global__ void __launch_bounds__(kCutThreads) find_cut_kernel(const unsigned* hist, const unsigned* top_keys,
                                                               unsigned* arrived, u64* block_mass, RowCut* cuts,
                                                               u64 p_fixed, int bits,
                                                               const __grid_constant__ Table table) {
  __shared__ double table_s[rule::kExpTableSize];
  __shared__ u64 scan[32];
  __shared__ int is_last;
  __shared__ int picked_block;
  __shared__ u64 picked_need;
  for (int j = threadIdx.x; j < rule::kExpTableSize; j += blockDim.x) table_s[j] = table.entries[j];
  const int row = static_cast<int>(blockIdx.y);
  const unsigned* h = hist + static_cast<long long>(row) * kBins;
  u64* masses = block_mass + static_cast<long long>(row) * kCutBlocks;
  __syncthreads();  // table_s
  const unsigned highest = top_keys[row];  // key + 1 of the row max (vocab >= 1)
  const one_block::Weigh weigh{key_value16<Bits>(highest - 1), rule::kLog2e, bits, table_s};
  const auto bin_mass = [&](int bin) {  // the fixed-point weight only where a bin has tokens
    const unsigned count = h[bin];
    return count != 0 ? count * weigh(key_value16<Bits>(static_cast<unsigned>(bin))) : u64{0};
  };
  const u64 mine = block_reduce(bin_mass(static_cast<int>(blockIdx.x) * kCutThreads + static_cast<int>(threadIdx.x)),
                                Sum{}, scan);
  if (threadIdx.x == 0) masses[blockIdx.x] = mine;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&arrived[row], 1u) == kCutBlocks - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();

  // Thread t holds block kCutBlocks - 1 - t, so the scan in thread order runs from the highest bins down.
  const int t = static_cast<int>(threadIdx.x);
  const u64 block_sum = t < kCutBlocks ? masses[kCutBlocks - 1 - t] : 0;
  u64 total;
  const u64 block_incl = one_block::block_inclusive_scan(scan, block_sum, total);
  if (total == 0) {
    if (t == 0) cuts[row] = {0, 0, 1};
    return;
  }
  const u64 target = rule::top_p_target(total, p_fixed);
  if (block_incl - block_sum < target && block_incl >= target) {  // one thread: block_sum > 0
    picked_block = kCutBlocks - 1 - t;
    picked_need = target - (block_incl - block_sum);
  }
  __syncthreads();
  const u64 need = picked_need;
  const int bin = picked_block * kCutThreads + (kCutThreads - 1 - t);
  const u64 mass = bin_mass(bin);
  u64 block_total;
  const u64 incl = one_block::block_inclusive_scan(scan, mass, block_total);
  const u64 run = incl - mass;
  if (run < need && incl >= need) {  // one thread: mass > 0
    const u64 w = weigh(key_value16<Bits>(static_cast<unsigned>(bin)));
    cuts[row] = {static_cast<unsigned>(bin), static_cast<unsigned>((need - run + w - 1) / w), 0};
  }
}

// ties: [rows, blocks of the mask grid], the tokens equal to the cut value in each block's slice.
// x: [rows, vocab]; cuts: [rows].
__global__ void __launch_bounds__(kThreads) count_ties_kernel(const u16* x, int vocab, int slice, const RowCut* cuts,
                                                              unsigned* ties) {
  __shared__ unsigned scratch[32];
  const RowCut cut = cuts[blockIdx.y];
  const u16* row = x + static_cast<long long>(blockIdx.y) * vocab;
  const int lo = static_cast<int>(blockIdx.x) * slice, hi = min(lo + slice, vocab);
  unsigned n = 0;
  if (!cut.keep_all)
    for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += kThreads) n += order_key16(row[i]) == cut.key;
  n = block_reduce(n, Sum{}, scratch);
  if (threadIdx.x == 0) ties[static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x] = n;
}

// x, y: [rows, vocab]; cuts: [rows]; ties: [rows, gridDim.x].
template <class Bits>
__global__ void __launch_bounds__(kThreads) mask_kernel(const u16* x, u16* y, int vocab, int slice,
                                                        const RowCut* cuts, const unsigned* ties) {
  __shared__ unsigned warp_ties[kThreads / 32];
  __shared__ unsigned scratch[32];
  const long long offset = static_cast<long long>(blockIdx.y) * vocab;
  const RowCut cut = cuts[blockIdx.y];
  const int lo = static_cast<int>(blockIdx.x) * slice, hi = min(lo + slice, vocab);
  // Ties of the cut value before this slice (summed by the block, the slices spread over its
  // threads), and in it: the same in every thread.
  const unsigned* row_ties = ties + static_cast<long long>(blockIdx.y) * gridDim.x;
  unsigned before = 0;
  for (unsigned b = threadIdx.x; b < blockIdx.x; b += blockDim.x) before += row_ties[b];
  before = block_reduce(before, Sum{}, scratch);
  const unsigned mine = row_ties[blockIdx.x];
  const auto keep = [&](unsigned key, bool tie_kept) {
    return cut.keep_all || key > cut.key || (key == cut.key && tie_kept);
  };
  if (cut.keep_all || before >= cut.needed || before + mine <= cut.needed) {
    const bool ties_kept = before < cut.needed;  // all of this slice's, or none
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
        if (i < hi) y[offset + i] = keep(order_key16(v[j]), ties_kept) ? v[j] : Bits::kNegInf;
      }
    }
    return;
  }
  // The slice holding the last kept tie: ranks in index order, one token a thread per step.
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  unsigned running = before;
  for (int base = lo; base < hi; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x);
    const u16 v = i < hi ? x[offset + i] : u16{0};
    const unsigned key = order_key16(v);
    const bool tie = i < hi && key == cut.key;
    const unsigned ballot = __ballot_sync(kFullMask, tie);
    if (lane == 0) warp_ties[warp] = __popc(ballot);
    __syncthreads();
    unsigned rank = running + __popc(ballot & ((1u << lane) - 1)), step = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      if (w < warp) rank += warp_ties[w];
      step += warp_ties[w];
    }
    __syncthreads();  // warp_ties is rewritten in the next step
    if (i < hi) y[offset + i] = keep(key, rank < cut.needed) ? v : Bits::kNegInf;
    running += step;
  }
}

// logits, out: [rows, vocab].
template <class Bits>
void launch(const Tensor& logits, std::uint64_t p_fixed, const Tensor& out, Stream stream) {
  const long long rows = logits.size(0), vocab = logits.size(1);
  // Blocks of the tie-count and mask kernels: about four an SM over all rows, whole unrolled steps.
  const long long step = kThreads * kUnroll;
  const long long want = ceil_div(4LL * sm_count(), rows), most = ceil_div(vocab, step);
  const long long per_row = std::max(1LL, std::min(want, most));
  const int slice = static_cast<int>(ceil_div(ceil_div(vocab, per_row), step) * step);
  const dim3 grid(ceil_div(vocab, slice), static_cast<unsigned>(rows));
  const int count_slice = vocab <= kBins ? kShortCountSlice : kCountSlice;
  const dim3 count_grid(ceil_div(vocab, count_slice), static_cast<unsigned>(rows));

  // The histograms, row maxima and the cut kernel's arrival counts first: one memset zeroes them.
  const std::size_t hist_bytes = align_up(static_cast<std::size_t>(rows) * (kBins + 2) * sizeof(unsigned));
  const std::size_t mass_bytes = align_up(static_cast<std::size_t>(rows) * kCutBlocks * sizeof(u64));
  const std::size_t cut_bytes = align_up(static_cast<std::size_t>(rows) * sizeof(RowCut));
  const std::size_t tie_bytes = align_up(static_cast<std::size_t>(rows) * grid.x * sizeof(unsigned));
  Scratch scratch(hist_bytes + mass_bytes + cut_bytes + tie_bytes, stream);
  unsigned* hist = scratch.at<unsigned>(0);
  unsigned* top = hist + rows * kBins;
  unsigned* arrived = top + rows;
  u64* mass = scratch.at<u64>(hist_bytes);
  RowCut* cuts = scratch.at<RowCut>(hist_bytes + mass_bytes);
  unsigned* ties = scratch.at<unsigned>(hist_bytes + mass_bytes + cut_bytes);
  IGNIS_CUDA_CHECK(cudaMemsetAsync(hist, 0, hist_bytes, to_cuda(stream)));
  Table table;
  std::copy_n(rule::exp2_table(), rule::kExpTableSize, table.entries);

  const u16* x = static_cast<const u16*>(logits.data());
  u16* y = static_cast<u16*>(out.data());
  const int n = static_cast<int>(vocab);
  constexpr int kCountSmem = kBins / 2 * sizeof(unsigned);
  IGNIS_CUDA_CHECK(
      cudaFuncSetAttribute(count_values_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kCountSmem));
  count_values_kernel<<<count_grid, kCountThreads, kCountSmem, to_cuda(stream)>>>(x, n, count_slice, hist, top);
  IGNIS_CHECK_LAUNCH();
  find_cut_kernel<Bits><<<dim3(kCutBlocks, static_cast<unsigned>(rows)), kCutThreads, 0, to_cuda(stream)>>>(
      hist, top, arrived, mass, cuts, p_fixed, rule::weight_bits(vocab), table);
  IGNIS_CHECK_LAUNCH();
  count_ties_kernel<<<grid, kThreads, 0, to_cuda(stream)>>>(x, n, slice, cuts, ties);
  IGNIS_CHECK_LAUNCH();
  mask_kernel<Bits><<<grid, kThreads, 0, to_cuda(stream)>>>(x, y, n, slice, cuts, ties);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

bool top_p_mask_narrow_fits(std::int64_t rows) { return rows <= kMaxRows; }

void top_p_mask_narrow(const Tensor& logits, std::uint64_t p_fixed, const Tensor& out, Stream stream) {
  if (logits.dtype() == DType::bf16) return launch<Bf16Bits>(logits, p_fixed, out, stream);
  return launch<F16Bits>(logits, p_fixed, out, stream);
}

}  // namespace ignis::cuda
