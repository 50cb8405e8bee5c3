// Sampling kernels that split each row across several blocks, so a few long rows still fill the
// GPU, and that read the row two or three times instead of once per radix digit:
//  1. scan: the argmax (largest key, lowest index) and, for top-k, a histogram of the top 11 bits
//     of the order keys; the last block of the row to finish picks the bucket holding the k-th token.
//  2. weigh (top-p): a histogram of the integer weights (and counts) per top bucket; the last block
//     picks the bucket where the rank-order mass reaches the top-p target.
//  2b. refine (top-p): only for rows whose picked bucket holds more tokens than the list takes (many
//     rows leave each row a short list): the same histograms over the next 11 bits of that bucket's
//     tokens, so the list holds one sub-bucket instead of the row falling back to one block.
//  3. compact: the tokens of that bucket (with top-k sampling: of every bucket from it up) are
//     appended to a small per-row list; masks write every other token on the way. The last block
//     selects the exact cut among the listed tokens by radix passes over the list alone (a top-k
//     sample's short list: sorted in shared memory) and finishes the row: the listed mask entries,
//     or the whole draw of a top-k sample.
//  4. draw (sampling without top-k): sums of the kept weights per chunk of 256 tokens; the last block
//     finds the chunk holding the drawn threshold and scans that chunk alone in index order.
// Tokens are ranked by the 64-bit composite (key << 32 | ~index), unique per token, so every cut is
// "composite >= c" and every selection has one answer. The weights and their sums are the integers
// of src/ops/sampling_rule.h, so the masks and ids equal the CPU path's exactly. A row whose list
// would overflow its workspace is finished by one block with the one-block routines.
// What the kernels share is in sampling_pass.cuh; the last block's list work in sampling_list.cuh.
#include <algorithm>

#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/sampling.h"
#include "cuda/ops/sampling_block.cuh"
#include "cuda/ops/sampling_list.cuh"
#include "cuda/ops/sampling_pass.cuh"
#include "cuda/ops/top_p_narrow.h"

namespace ignis::cuda {
namespace {

using namespace multi_pass;

// The weight of a token of a slice starting at `offset` at or above `cut` (one_block value functor).
struct SliceWeight {
  Weigh weigh;
  u64 cut;
  int offset;
  __device__ u64 operator()(int i, float v, unsigned key) const {
    return composite(key, i + offset) >= cut ? weigh(v) : 0;
  }
};

// logits: [rows, vocab], job.blocks blocks a row; ids: [rows] or null.
template <class T>
__global__ void __launch_bounds__(kThreads) scan_kernel(const T* logits, int* ids, const __grid_constant__ Job job) {
  __shared__ PassShared s;
  const Slice sl = slice_of(job);
  const T* x = logits + static_cast<long long>(sl.row) * job.vocab;
  RowState& st = job.rows[sl.row];
  const bool count = job.k > 0;
  if (count)
    for (int b = threadIdx.x; b < kTopBins; b += blockDim.x) s.counts[b] = 0;
  __syncthreads();
  u64 best = 0;
  for_slice(x, sl.lo, sl.hi, [&](int i, float v, bool valid) {
    const unsigned key = rule::order_key(v);
    if (valid) best = best > composite(key, i) ? best : composite(key, i);
    // A native shared atomic a token: hardware resolves lanes that share a bin. Grouping the lanes
    // first (__match_any_sync) made this scan compute-bound, 3.05 ms for 4096 x 128256 bf16 against
    // 0.49 ms without counts (ncu, H200, session 29).
    if (count && valid) atomicAdd(&s.counts[key >> kTopShift], 1u);
  });
  best = block_reduce(best, one_block::MaxU64{}, s.scratch);
  if (threadIdx.x == 0) atomicMax(&st.best, best);
  RowHist& hist = job.hists[job.blocks > 1 ? sl.row : 0];
  if (count && job.blocks > 1) {
    __syncthreads();
    for (int b = threadIdx.x; b < kTopBins; b += blockDim.x)
      if (s.counts[b] != 0) atomicAdd(&hist.counts[b], s.counts[b]);
  }
  if (!last_to_arrive(s, &st.arrived[kScan], job.blocks)) return;
  if (job.plan.greedy && job.mode == Mode::sample) {
    if (threadIdx.x == 0) ids[sl.row] = composite_index(st.best);
    return;
  }
  if (!count) return;
  const unsigned* counts = job.blocks > 1 ? hist.counts : s.counts;
  pick_bin(s, kTopBins, [&](int b) { return u64{counts[b]}; }, static_cast<u64>(job.k));
  if (threadIdx.x == 0) {
    st.bin = s.bin;
    st.shift = kTopShift;
    st.need = s.need;
    // A top-k sample lists every bucket from the picked one up: the k - need tokens above it too.
    const u64 listed = counts[s.bin] + (job.mode == Mode::sample ? static_cast<u64>(job.k) - s.need : 0);
    st.overflow = listed > static_cast<u64>(job.list_cap);
  }
}

// The weights of a slice's histogram, summed as limbs (one_block::add_to_limbs says why).
struct Limbs {
  unsigned sum[one_block::kLimbs][kTopBins];
};

// Count and weight histograms of this block's slice by bin_of(order key) (kNoBin: left out), in s,
// and added into the row's histogram `hist` when the row has several blocks. s.table must be
// loaded before the call (its first barrier publishes it). Ends at a barrier.
// x: [vocab], one row.
template <class T, class BinOf>
__device__ void slice_histograms(PassShared& s, Limbs& limbs, RowHist& hist, const Job& job, const T* x,
                                 const Slice& sl, const Weigh& weigh, BinOf bin_of) {
  for (int b = threadIdx.x; b < kTopBins; b += blockDim.x) {
    s.counts[b] = 0;
    s.weights[b] = 0;
    for (int j = 0; j < one_block::kLimbs; ++j) limbs.sum[j][b] = 0;
  }
  __syncthreads();
  for (int lo = sl.lo; lo < sl.hi; lo += one_block::kLimbSpan) {
    for_slice(x, lo, min(sl.hi, lo + one_block::kLimbSpan), [&](int, float v, bool valid) {
      const unsigned bin = valid ? bin_of(rule::order_key(v)) : kNoBin;
      if (bin == kNoBin) return;
      atomicAdd(&s.counts[bin], 1u);
      one_block::add_to_limbs(limbs.sum, bin, weigh(v));
    });
    __syncthreads();
    one_block::fold_limbs(limbs.sum, s.weights);
    __syncthreads();
  }
  if (job.blocks > 1)
    for (int b = threadIdx.x; b < kTopBins; b += blockDim.x) {
      if (s.counts[b] != 0) atomicAdd(&hist.counts[b], s.counts[b]);
      if (s.weights[b] != 0) atomicAdd(&hist.weights[b], s.weights[b]);
    }
}

// Top-p without top-k: weight (and count) histograms of the top digit.
// logits: [rows, vocab].
template <class T>
__global__ void __launch_bounds__(kThreads) weigh_kernel(const T* logits, const __grid_constant__ Job job) {
  __shared__ PassShared s;
  const Slice sl = slice_of(job);
  const T* x = logits + static_cast<long long>(sl.row) * job.vocab;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  Limbs& limbs = *reinterpret_cast<Limbs*>(dynamic_smem);  // dynamic: with s it passes the 48 KB static limit
  RowState& st = job.rows[sl.row];
  RowHist& hist = job.hists[job.blocks > 1 ? sl.row : 0];
  load_table(s, job);
  const Weigh weigh = row_weigh(s, job, st);
  slice_histograms(s, limbs, hist, job, x, sl, weigh, [](unsigned key) { return key >> kTopShift; });
  if (!last_to_arrive(s, &st.arrived[kWeigh], job.blocks)) return;
  const unsigned* counts = job.blocks > 1 ? hist.counts : s.counts;
  const u64* weights = job.blocks > 1 ? hist.weights : s.weights;
  u64 total = 0;
  for (int b = threadIdx.x; b < kTopBins; b += blockDim.x) total += weights[b];
  total = block_reduce(total, Sum{}, s.scratch);
  if (total == 0) {  // no finite logit: nothing is cut
    if (threadIdx.x == 0) st.bin = kNoBin;
    return;
  }
  pick_bin(s, kTopBins, [&](int b) { return weights[b]; }, rule::top_p_target(total, job.p_fixed));
  const bool split = counts[s.bin] > static_cast<unsigned>(job.list_cap);
  if (threadIdx.x == 0) {
    st.bin = s.bin;
    st.shift = kTopShift;
    st.need = s.need;
    st.overflow = split;
  }
  if (split && job.blocks > 1) {  // refine_kernel sums into the row's histogram again
    __syncthreads();
    for (int b = threadIdx.x; b < kTopBins; b += blockDim.x) {
      hist.counts[b] = 0;
      hist.weights[b] = 0;
    }
  }
}

// Top-p whose picked bucket overflows the list: weight (and count) histograms of the next digit of
// that bucket's tokens; the last block picks the sub-bucket where the bucket's share of the target
// is reached. Rows whose bucket fits return at once.
// logits: [rows, vocab].
template <class T>
__global__ void __launch_bounds__(kThreads) refine_kernel(const T* logits, const __grid_constant__ Job job) {
  __shared__ PassShared s;
  const Slice sl = slice_of(job);
  RowState& st = job.rows[sl.row];
  if (!st.overflow) return;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  Limbs& limbs = *reinterpret_cast<Limbs*>(dynamic_smem);  // dynamic: with s it passes the 48 KB static limit
  const T* x = logits + static_cast<long long>(sl.row) * job.vocab;
  const unsigned bucket = st.bin;
  RowHist& hist = job.hists[job.blocks > 1 ? sl.row : 0];
  load_table(s, job);
  const Weigh weigh = row_weigh(s, job, st);
  slice_histograms(s, limbs, hist, job, x, sl, weigh, [bucket](unsigned key) {
    return (key >> kTopShift) == bucket ? (key >> kSubShift) & (kTopBins - 1) : kNoBin;
  });
  if (!last_to_arrive(s, &st.arrived[kRefine], job.blocks)) return;
  const unsigned* counts = job.blocks > 1 ? hist.counts : s.counts;
  const u64* weights = job.blocks > 1 ? hist.weights : s.weights;
  pick_bin(s, kTopBins, [&](int b) { return weights[b]; }, st.need);
  if (threadIdx.x == 0) {
    st.bin = (bucket << (kTopShift - kSubShift)) | s.bin;
    st.shift = kSubShift;
    st.need = s.need;
    st.overflow = counts[s.bin] > static_cast<unsigned>(job.list_cap);
  }
}

// logits, out: [rows, vocab] (out null when sampling, may alias logits); ids: [rows] or null.
template <class T>
__global__ void __launch_bounds__(kThreads) compact_kernel(const T* logits, T* out, int* ids,
                                                           const __grid_constant__ Job job) {
  __shared__ PassShared s;
  __shared__ one_block::Shared alone;
  const Slice sl = slice_of(job);
  const long long offset = static_cast<long long>(sl.row) * job.vocab;
  const T* x = logits + offset;
  T* y = out != nullptr ? out + offset : nullptr;  // masks only; y may alias x
  RowState& st = job.rows[sl.row];
  const unsigned bin = st.bin, shift = st.shift;
  const bool mask = job.mode != Mode::sample;
  const bool from_bin_up = job.mode == Mode::sample && job.k > 0;
  if (bin == kNoBin) {  // top-p of a row without a finite logit: unchanged
    if (mask)
      for (int i = sl.lo + threadIdx.x; i < sl.hi; i += blockDim.x) y[i] = x[i];
    return;
  }
  const bool overflow = st.overflow;
  const bool weighted = job.mode != Mode::top_k;  // top-k masks rank by count alone
  u64* list = job.lists + static_cast<long long>(sl.row) * job.list_cap;
  u64* weights = weighted ? job.list_weights + static_cast<long long>(sl.row) * job.list_cap : nullptr;
  if (!overflow)
    for_slice(x, sl.lo, sl.hi, [&](int i, float v, bool valid) {
      const unsigned key = rule::order_key(v), b = key >> shift;
      const bool take = valid && (from_bin_up ? b >= bin : b == bin);
      append(list, &st.listed, job.list_cap, take, composite(key, i));
      if (mask && valid && !take) y[i] = b > bin ? from_float<T>(v) : from_float<T>(-INFINITY);
    });
  if (!last_to_arrive(s, &st.arrived[kCompact], job.blocks)) return;
  load_table(s, job);
  __syncthreads();
  if (overflow) {  // nothing of the row was written: one block does it all
    if (job.mode == Mode::top_k) {
      one_block::top_k_row(alone, x, y, job.vocab, static_cast<int>(job.k));
    } else if (job.mode == Mode::top_p) {
      one_block::top_p_row(alone, x, y, job.vocab, job.p_fixed, job.bits, s.table);
    } else if (from_bin_up) {
      const int id = one_block::sample_row(alone, x, job.vocab, job.plan, static_cast<u64>(sl.row), s.table);
      if (threadIdx.x == 0) ids[sl.row] = id;
    } else {
      one_block::copy_table(alone, s.table);
      const Weigh weigh = row_weigh(s, job, st);
      const u64 total = one_block::kept_total(alone, x, job.vocab, one_block::KeptMass{weigh, Cut{}, Cut{}, false, 0});
      const Cut cut = one_block::top_p_cut(alone, x, job.vocab, weigh, Cut{}, total, job.p_fixed);
      if (threadIdx.x == 0) st.cut = composite(cut.key, cut.last);
    }
    return;
  }
  const int m = min(static_cast<int>(st.listed), job.list_cap);
  if (weighted) {  // once, for every radix pass over the list
    const Weigh weigh = row_weigh(s, job, st);
    for (int j = threadIdx.x; j < m; j += blockDim.x) weights[j] = weigh(composite_value(list[j]));
    __syncthreads();
  }
  if (from_bin_up) {
    const bool sort = m <= (sizeof(T) == 2 ? kSortedList : kSortedListF32);
    const int id = sort ? sample_from_sorted_list(s, job, st, list, weights, m, sl.row)
                        : sample_from_list(s, job, st, list, weights, m, sl.row);
    if (threadIdx.x == 0) ids[sl.row] = id;
    return;
  }
  const u64 cut = job.mode == Mode::top_k ? list_select(s, list, m, ByRank{}, One{}, st.need)
                                          : list_select(s, list, m, ByRank{}, ListedWeight{weights, 0}, st.need);
  if (mask) {
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
      const u64 c = list[j];
      const int i = composite_index(c);
      y[i] = c >= cut ? x[i] : from_float<T>(-INFINITY);
    }
  } else if (threadIdx.x == 0) {
    st.cut = cut;
  }
}

// Sampling without top-k: per-block sums of the kept weights, then the slice holding the draw.
// logits: [rows, vocab]; ids: [rows].
template <class T>
__global__ void __launch_bounds__(kThreads) draw_kernel(const T* logits, int* ids, const __grid_constant__ Job job) {
  __shared__ PassShared s;
  __shared__ one_block::Shared alone;
  const Slice sl = slice_of(job);
  const T* x = logits + static_cast<long long>(sl.row) * job.vocab;
  RowState& st = job.rows[sl.row];
  load_table(s, job);
  __syncthreads();
  const Weigh weigh = row_weigh(s, job, st);
  const u64 cut = st.cut;
  u64* chunk_sums = job.partials + static_cast<long long>(sl.row) * job.chunks;
  u64 sum = 0;
  for_slice(
      x, sl.lo, sl.hi,
      [&](int i, float v, bool valid) {
        if (valid && composite(rule::order_key(v), i) >= cut) sum += weigh(v);
      },
      [&](int base) {
        const u64 chunk = warp_reduce(sum, Sum{});
        if (threadIdx.x % 32 == 0) chunk_sums[base / kChunk] = chunk;
        sum = 0;
      });
  if (!last_to_arrive(s, &st.arrived[kDraw], job.blocks)) return;
  // The chunk sums let the last block scan 256 tokens for the draw instead of its slice: with one
  // block a row, that scan re-weighed half the row on average.
  u64 total = 0;
  for (int c = threadIdx.x; c < job.chunks; c += blockDim.x) total += chunk_sums[c];
  total = block_reduce(total, Sum{}, s.scratch);
  if (total == 0) {  // a row without a finite logit
    if (threadIdx.x == 0) ids[sl.row] = composite_index(st.best);
    return;
  }
  const u64 threshold = rule::draw_threshold(rule::random_bits(job.plan.seed, job.plan.step, sl.row), total);
  // Bin b stands for chunk chunks - 1 - b, so that scanning bins downwards walks chunks upwards.
  pick_bin(s, job.chunks, [&](int b) { return chunk_sums[job.chunks - 1 - b]; }, threshold + 1);
  const int chunk = job.chunks - 1 - static_cast<int>(s.bin);
  const u64 need = s.need;
  const int lo = chunk * kChunk, n = min(lo + kChunk, job.vocab) - lo;
  const int i = one_block::find_first_reaching(alone, x + lo, n, SliceWeight{weigh, cut, lo}, need);
  if (threadIdx.x == 0) ids[sl.row] = lo + i;
}

// Blocks per row: about four blocks per SM over all rows, at least kMinSlice tokens a block.
// k: the top-k of a sample (0: none).
Job make_job(Mode mode, long long rows, long long vocab, long long k = 0) {
  Job job{};
  job.mode = mode;
  job.vocab = static_cast<int>(vocab);
  const long long want = ceil_div(4LL * sm_count(), rows);
  const long long most = ceil_div(vocab, kMinSlice);
  const long long blocks = std::max(1LL, std::min(want, most));
  job.slice = static_cast<int>((ceil_div(vocab, blocks) + kThreads - 1) / kThreads * kThreads);
  job.blocks = static_cast<int>(ceil_div(vocab, job.slice));
  job.chunks = static_cast<int>(ceil_div(vocab, kChunk));
  long long cap = std::min(16384LL, std::max(1024LL, kMaxListBytes / 8 / rows));
  // A top-k sample lists every token above the picked bucket too (up to k), so k alone must not fill the list.
  cap = std::max(cap, 2 * k);
  job.list_cap = static_cast<int>(std::min(vocab, cap));
  job.scale = rule::kLog2e;
  job.bits = rule::weight_bits(vocab);
  std::copy_n(rule::exp2_table(), rule::kExpTableSize, job.table);
  return job;
}

// Device workspace of one call; the row states (and histograms) start at zero.
class Workspace {
 public:
  Workspace(Job& job, long long rows, Stream stream)
      : state_bytes_(align_up(rows * sizeof(RowState))),
        hist_bytes_(job.blocks > 1 ? align_up(rows * sizeof(RowHist)) : align_up(sizeof(RowHist))),
        list_bytes_(align_up(rows * job.list_cap * sizeof(u64))),
        list_weight_bytes_(job.mode != Mode::top_k ? list_bytes_ : 0),
        // Only the draw keeps chunk sums; masks need none (at 4096 x 262144 they would add 32 MB, past
        // what a stream's scratch keeps between calls).
        chunk_bytes_(job.mode == Mode::sample ? align_up(rows * job.chunks * sizeof(u64)) : 0),
        scratch_(state_bytes_ + hist_bytes_ + list_bytes_ + list_weight_bytes_ + chunk_bytes_, stream) {
    job.rows = scratch_.at<RowState>(0);
    job.hists = scratch_.at<RowHist>(state_bytes_);
    job.lists = scratch_.at<u64>(state_bytes_ + hist_bytes_);
    job.list_weights = scratch_.at<u64>(state_bytes_ + hist_bytes_ + list_bytes_);
    job.partials = scratch_.at<u64>(state_bytes_ + hist_bytes_ + list_bytes_ + list_weight_bytes_);
    IGNIS_CUDA_CHECK(cudaMemsetAsync(job.rows, 0, state_bytes_ + (job.blocks > 1 ? hist_bytes_ : 0), to_cuda(stream)));
  }

 private:
  std::size_t state_bytes_, hist_bytes_, list_bytes_, list_weight_bytes_, chunk_bytes_;
  Scratch scratch_;
};

// The top-p passes: weigh, then refine (which returns at once for rows whose bucket fits the list).
// x: [rows, vocab].
template <class T>
void launch_weigh_and_refine(const T* x, const Job& job, unsigned grid, Stream stream) {
  for (auto kernel : {weigh_kernel<T>, refine_kernel<T>}) {
    IGNIS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sizeof(Limbs)));
    kernel<<<grid, kThreads, sizeof(Limbs), to_cuda(stream)>>>(x, job);
    IGNIS_CHECK_LAUNCH();
  }
}

// src, dst: [rows, vocab].
void copy_async(const Tensor& src, const Tensor& dst, Stream stream) {
  if (src.data() == dst.data()) return;
  IGNIS_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, to_cuda(stream)));
}

// logits, out: [rows, vocab].
template <class T>
void launch_top_k(const Tensor& logits, std::int64_t k, const Tensor& out, Stream stream) {
  const long long rows = logits.size(0), vocab = logits.size(1);
  if (rows == 0 || vocab == 0) return;
  if (k == 0) return copy_async(logits, out, stream);
  Job job = make_job(Mode::top_k, rows, vocab);
  job.k = k;
  Workspace ws(job, rows, stream);
  const unsigned grid = static_cast<unsigned>(rows * job.blocks);
  const T* x = logits.data_as<const T>();
  scan_kernel<T><<<grid, kThreads, 0, to_cuda(stream)>>>(x, nullptr, job);
  IGNIS_CHECK_LAUNCH();
  compact_kernel<T><<<grid, kThreads, 0, to_cuda(stream)>>>(x, out.data_as<T>(), nullptr, job);
  IGNIS_CHECK_LAUNCH();
}

// logits, out: [rows, vocab].
template <class T>
void launch_top_p(const Tensor& logits, std::uint64_t p_fixed, const Tensor& out, Stream stream) {
  const long long rows = logits.size(0), vocab = logits.size(1);
  if (rows == 0 || vocab == 0) return;
  if (p_fixed >= rule::kTopPOff) return copy_async(logits, out, stream);
  if constexpr (sizeof(T) == 2)
    if (top_p_mask_narrow_fits(rows)) return top_p_mask_narrow(logits, p_fixed, out, stream);
  Job job = make_job(Mode::top_p, rows, vocab);
  job.p_fixed = p_fixed;
  Workspace ws(job, rows, stream);
  const unsigned grid = static_cast<unsigned>(rows * job.blocks);
  const T* x = logits.data_as<const T>();
  scan_kernel<T><<<grid, kThreads, 0, to_cuda(stream)>>>(x, nullptr, job);
  IGNIS_CHECK_LAUNCH();
  launch_weigh_and_refine(x, job, grid, stream);
  compact_kernel<T><<<grid, kThreads, 0, to_cuda(stream)>>>(x, out.data_as<T>(), nullptr, job);
  IGNIS_CHECK_LAUNCH();
}

// logits: [rows, vocab]; ids: [rows] i32.
template <class T>
void launch_sample(const Tensor& logits, const rule::Plan& plan, const Tensor& ids, Stream stream) {
  const long long rows = logits.size(0), vocab = logits.size(1);
  if (rows == 0 || vocab == 0) return;
  Job job = make_job(Mode::sample, rows, vocab, plan.greedy ? 0 : plan.top_k);
  job.plan = plan;
  job.k = plan.greedy ? 0 : plan.top_k;
  job.p_fixed = plan.p_fixed;
  job.scale = plan.scale;
  job.bits = plan.bits;
  Workspace ws(job, rows, stream);
  const unsigned grid = static_cast<unsigned>(rows * job.blocks);
  const T* x = logits.data_as<const T>();
  int* out = ids.data_as<int>();
  scan_kernel<T><<<grid, kThreads, 0, to_cuda(stream)>>>(x, out, job);
  IGNIS_CHECK_LAUNCH();
  if (plan.greedy) return;
  if (job.k > 0) {  // everything after the scan happens on the list
    compact_kernel<T><<<grid, kThreads, 0, to_cuda(stream)>>>(x, nullptr, out, job);
    IGNIS_CHECK_LAUNCH();
    return;
  }
  if (job.p_fixed < rule::kTopPOff) {
    launch_weigh_and_refine(x, job, grid, stream);
    compact_kernel<T><<<grid, kThreads, 0, to_cuda(stream)>>>(x, nullptr, out, job);
    IGNIS_CHECK_LAUNCH();
  }
  draw_kernel<T><<<grid, kThreads, 0, to_cuda(stream)>>>(x, out, job);
  IGNIS_CHECK_LAUNCH();
}

}  // namespace

void top_k_mask(const Tensor& logits, std::int64_t k, const Tensor& out, Stream stream) {
  switch (logits.dtype()) {
    case DType::f32: return launch_top_k<float>(logits, k, out, stream);
    case DType::f16: return launch_top_k<__half>(logits, k, out, stream);
    case DType::bf16: return launch_top_k<__nv_bfloat16>(logits, k, out, stream);
    default: fail_expected("top_k_mask", "logits.dtype", "f32, f16 or bf16", logits.dtype());
  }
}

void top_p_mask(const Tensor& logits, std::uint64_t p_fixed, const Tensor& out, Stream stream) {
  switch (logits.dtype()) {
    case DType::f32: return launch_top_p<float>(logits, p_fixed, out, stream);
    case DType::f16: return launch_top_p<__half>(logits, p_fixed, out, stream);
    case DType::bf16: return launch_top_p<__nv_bfloat16>(logits, p_fixed, out, stream);
    default: fail_expected("top_p_mask", "logits.dtype", "f32, f16 or bf16", logits.dtype());
  }
}

void sample(const Tensor& logits, const rule::Plan& plan, const Tensor& ids, Stream stream) {
  switch (logits.dtype()) {
    case DType::f32: return launch_sample<float>(logits, plan, ids, stream);
    case DType::f16: return launch_sample<__half>(logits, plan, ids, stream);
    case DType::bf16: return launch_sample<__nv_bfloat16>(logits, plan, ids, stream);
    default: fail_expected("sample", "logits.dtype", "f32, f16 or bf16", logits.dtype());
  }
}

}  // namespace ignis::cuda
