// Embedding gather (forward) and scatter-add (backward).
// Forward: warps copy 2 KB chunks (for 16-byte words) of output rows, with the widest word (16 bytes
// when the row size and pointers allow) that divides the row: dtype-agnostic byte movement.
// Backward: deterministic without floating-point atomics. The (id, position) pairs are radix-sorted
// by id (stable, so positions stay ascending within an id); the warp at the start of each run of
// equal ids sums that run's dout rows in fp32 in position order and writes the table row once.
#include <algorithm>
#include <bit>
#include <cub/device/device_radix_sort.cuh>

#include "cuda/common/convert.cuh"
#include "cuda/common/index_flag.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/embedding.h"

namespace ignis::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * 32;

// Forward: a row is split into chunks of 32 x kWordsPerLane words; each warp copies one chunk,
// loading all its words before storing any (8 loads of 16 bytes in flight a lane: a warp spends
// half its life waiting on its id, so 2 KB a warp left DRAM short of requests, worst with the TLB
// misses of random rows in a 1-2 GB table). Warps take (row, chunk) pairs in order, so a 16 KB row
// is 4 warps and a short row one partly idle warp. Rows and output are touched once; rows shorter
// than kPlainRowBytes are loaded and stored evict-first (.cs), longer ones plainly: measured on the
// H100 (PERF_NOTES session 8), 8 KB rows gained 4 points of copy with the hints and 16 KB rows lost
// 1-1.5 (mostly to the evict-first loads: with only the stores evict-first they lost ~0.5).
constexpr int kWordsPerLane = 8;
constexpr int kChunkWords = 32 * kWordsPerLane;
constexpr int kGatherWarps = 4;
// 12 blocks of 4 warps an SM (40 registers, no spills): 48 warps x 4 KB = 192 KB of loads in flight
// an SM, against 64 x 2 KB with 4 words a lane.
constexpr int kGatherBlocksPerSm = 12;
// On fast-memory cards (fast_memory_card) the gather asks for the SM's L1 at its smallest (the
// carveout at the most shared memory, which it does not use). On the H200 that gained 1.1-1.8 points
// of copy on every cell (f32 32000 82.7 -> 84.4%, bf16 80.3 -> 81.7%). Session 22 got there with a
// pad that capped the blocks an SM at 8 and took the carveout along. Session 23 told the two apart:
// 12 blocks with the small L1 read as 8 did (within 0.9), and 8 blocks with 92-156 KB of L1 lost
// 0.5-3.6 points (16-bit rows 1.8-3.6). On the H100 the small L1 costs 16-bit rows 3.6-4.3 points at
// 8 or 12 blocks, so there the driver chooses (PERF_NOTES sessions 22 and 23).
constexpr long long kPlainRowBytes = 16 * 1024;

// Loads and stores of one word, evict-first or plain.
template <bool kEvictFirst, class W>
__device__ __forceinline__ W load_word(const W* p) {
  if constexpr (kEvictFirst) return __ldcs(p);
  else return *p;
}
template <bool kEvictFirst, class W>
__device__ __forceinline__ void store_word(W* p, W v) {
  if constexpr (kEvictFirst) __stcs(p, v);
  else *p = v;
}

// W: the copy word (uint4, uint2, unsigned or unsigned short); words: row size in words;
// chunks: ceil(words / kChunkWords), with n * chunks < 2^31 (checked at launch).
// table: [vocab, words], ids: [n], out: [n, words]; flag: [3] (index_flag.cuh).
template <class W, class Id, bool kEvictFirst>
__global__ void __launch_bounds__(kGatherWarps * 32, kGatherBlocksPerSm)
    gather_rows_kernel(const W* __restrict__ table, const Id* __restrict__ ids, W* __restrict__ out, long long n,
                       long long vocab, long long words, unsigned chunks, long long* flag) {
  const unsigned unit = blockIdx.x * kGatherWarps + threadIdx.x / 32;
  const unsigned row32 = unit / chunks;
  if (row32 >= n) return;
  const long long row = row32;
  const int lane = threadIdx.x % 32;
  const long long start = static_cast<long long>(unit - row32 * chunks) * kChunkWords;
  const long long first = start + lane;
  const long long id = static_cast<long long>(ids[row]);
  W* dst = out + row * words;
  if (id < 0 || id >= vocab) {
    if (lane == 0 && first == 0) record_bad_index(flag, row, id, vocab);
#pragma unroll
    for (int u = 0; u < kWordsPerLane; ++u)
      if (first + u * 32 < words) dst[first + u * 32] = W{};
    return;
  }
  // Two pointers and a 32-bit bound, not 64-bit indices: 8 words of 16 bytes take 32 registers
  // already, and more registers would mean fewer warps an SM. span is the same for the whole warp.
  const W* src = table + id * words + first;
  W* to = dst + first;
  const int span = static_cast<int>(min(words - start, static_cast<long long>(kChunkWords)));
  W v[kWordsPerLane];
  if (span == kChunkWords) {  // every chunk but a partial last one: no per-word predicates live
#pragma unroll
    for (int u = 0; u < kWordsPerLane; ++u) v[u] = load_word<kEvictFirst>(src + u * 32);
#pragma unroll
    for (int u = 0; u < kWordsPerLane; ++u) store_word<kEvictFirst>(to + u * 32, v[u]);
    return;
  }
  // A row's last, partial chunk: 4 words a lane at a time, so few predicates and registers are live.
  constexpr int kTailWords = kWordsPerLane / 2;
#pragma unroll 1
  for (int at = 0; at < span; at += 32 * kTailWords) {
#pragma unroll
    for (int u = 0; u < kTailWords; ++u)
      if (lane + at + u * 32 < span) v[u] = load_word<kEvictFirst>(src + at + u * 32);
#pragma unroll
    for (int u = 0; u < kTailWords; ++u)
      if (lane + at + u * 32 < span) store_word<kEvictFirst>(to + at + u * 32, v[u]);
  }
}

// table: [vocab, dim], ids: [n], out: [n, dim]; flag: [3].
template <class W, class Id>
void launch_gather(const Tensor& table, const Tensor& ids, const Tensor& out, long long* flag, Stream stream) {
  const long long n = ids.size(0);
  const long long words = static_cast<long long>(table.size(1) * dtype_size(table.dtype()) / sizeof(W));
  const long long chunks = std::max<long long>(1, (words + kChunkWords - 1) / kChunkWords);
  check_arg(n * chunks < (1LL << 31), "embedding_forward", "ids.size(0) * row chunks", "< 2^31",
            detail::lazy_concat(n, " * ", chunks));
  const auto kernel = table.size(1) * dtype_size(table.dtype()) < kPlainRowBytes ? gather_rows_kernel<W, Id, true>
                                                                                : gather_rows_kernel<W, Id, false>;
  if (fast_memory_card())
    IGNIS_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  kernel<<<ceil_div(n * chunks, kGatherWarps), kGatherWarps * 32, 0, to_cuda(stream)>>>(
      static_cast<const W*>(table.data()), ids.data_as<const Id>(), static_cast<W*>(out.data()), n, table.size(0),
      words, static_cast<unsigned>(chunks), flag);
  IGNIS_CHECK_LAUNCH();
}

// table: [vocab, dim], ids: [n], out: [n, dim]; flag: [3].
template <class Id>
void gather_any_width(const Tensor& table, const Tensor& ids, const Tensor& out, long long* flag, Stream stream) {
  const std::size_t row_bytes = static_cast<std::size_t>(table.size(1)) * dtype_size(table.dtype());
  const auto fits = [&](std::size_t word) {
    return row_bytes % word == 0 && reinterpret_cast<std::uintptr_t>(table.data()) % word == 0 &&
           reinterpret_cast<std::uintptr_t>(out.data()) % word == 0;
  };
  if (fits(16)) return launch_gather<uint4, Id>(table, ids, out, flag, stream);
  if (fits(8)) return launch_gather<uint2, Id>(table, ids, out, flag, stream);
  if (fits(4)) return launch_gather<unsigned, Id>(table, ids, out, flag, stream);
  launch_gather<unsigned short, Id>(table, ids, out, flag, stream);
}

// Sort keys: the id, or vocab (sorted last, then skipped) for a bad id, which is recorded.
// ids, keys, positions: [n]; flag: [3].
template <class Id>
__global__ void sort_keys_kernel(const Id* __restrict__ ids, long long n, long long vocab, unsigned* keys,
                                 int* positions, long long* flag) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long id = static_cast<long long>(ids[i]);
  const bool bad = id < 0 || id >= vocab;
  if (bad) record_bad_index(flag, i, id, vocab);
  keys[i] = static_cast<unsigned>(bad ? vocab : id);
  positions[i] = static_cast<int>(i);
}

// One warp per sorted entry; only the warp at the start of a run of equal keys works.
// dout: [n, dim]; keys, positions: [n], sorted by key; dtable: [vocab, dim].
template <class T, int V>
__global__ void sum_runs_kernel(const T* __restrict__ dout, const unsigned* __restrict__ keys,
                                const int* __restrict__ positions, long long n, long long vocab, long long dim,
                                T* __restrict__ dtable) {
  const long long i = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (i >= n) return;
  const unsigned key = keys[i];
  if (key >= vocab || (i > 0 && keys[i - 1] == key)) return;
  long long end = i + 1;
  while (end < n && keys[end] == key) ++end;
  T* dst = dtable + static_cast<long long>(key) * dim;
  const int lane = threadIdx.x % 32;
  for (long long c = static_cast<long long>(lane) * V; c < dim; c += 32 * V) {
    float acc[V] = {};
    for (long long j = i; j < end; ++j) {
      float v[V];
      load_floats<T, V>(dout + static_cast<long long>(positions[j]) * dim + c, v);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += v[k];
    }
    store_floats<T, V>(dst + c, acc);
  }
}

// dout: [n, dim], ids: [n], dtable: [vocab, dim].
template <class T, class Id>
bool launch_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable, Stream stream) {
  constexpr int V = 16 / sizeof(T);
  const long long n = ids.size(0), vocab = dtable.size(0), dim = dtable.size(1);
  IGNIS_CUDA_CHECK(cudaMemsetAsync(dtable.data(), 0, dtable.nbytes(), to_cuda(stream)));  // 0 bits are 0.0
  if (n == 0) return false;

  const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<unsigned long long>(vocab))));
  const int items = static_cast<int>(n);
  std::size_t sort_bytes = 0;
  IGNIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const unsigned*>(nullptr),
                                                   static_cast<unsigned*>(nullptr), static_cast<const int*>(nullptr),
                                                   static_cast<int*>(nullptr), items, 0, end_bit, to_cuda(stream)));
  const std::size_t list = align_up(sizeof(int) * n);  // keys and positions are 4 bytes each
  Scratch scratch(align_up(kIndexFlagBytes) + 4 * list + sort_bytes, stream);
  auto* flag = scratch.at<long long>(0);
  const std::size_t base = align_up(kIndexFlagBytes);
  auto* keys = scratch.at<unsigned>(base);
  int* positions = scratch.at<int>(base + list);
  auto* sorted_keys = scratch.at<unsigned>(base + 2 * list);
  int* sorted_positions = scratch.at<int>(base + 3 * list);
  void* sort_temp = scratch.at<char>(base + 4 * list);

  clear_index_flag(flag, stream);
  sort_keys_kernel<Id><<<ceil_div(n, 256), 256, 0, to_cuda(stream)>>>(ids.data_as<const Id>(), n, vocab, keys,
                                                                      positions, flag);
  IGNIS_CHECK_LAUNCH();
  IGNIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp, sort_bytes, keys, sorted_keys, positions,
                                                   sorted_positions, items, 0, end_bit, to_cuda(stream)));
  const T* g = dout.data_as<const T>();
  T* out = dtable.data_as<T>();
  const unsigned blocks = ceil_div(n, kWarpsPerBlock);
  if (dim % V == 0 && pack_aligned<T, V>(g) && pack_aligned<T, V>(out))
    sum_runs_kernel<T, V><<<blocks, kThreads, 0, to_cuda(stream)>>>(g, sorted_keys, sorted_positions, n, vocab,
                                                                    dim, out);
  else
    sum_runs_kernel<T, 1><<<blocks, kThreads, 0, to_cuda(stream)>>>(g, sorted_keys, sorted_positions, n, vocab,
                                                                    dim, out);
  IGNIS_CHECK_LAUNCH();
  long long record[3];
  read_index_flag(flag, record, stream);
  return record[0] >= 0;
}

// dout: [n, dim], ids: [n], dtable: [vocab, dim].
template <class T>
bool backward_any_ids(const Tensor& dout, const Tensor& ids, const Tensor& dtable, Stream stream) {
  if (ids.dtype() == DType::i32) return launch_backward<T, std::int32_t>(dout, ids, dtable, stream);
  return launch_backward<T, std::int64_t>(dout, ids, dtable, stream);
}

}  // namespace

void embedding_forward(const Tensor& table, const Tensor& ids, const Tensor& out, long long* flag, Stream stream) {
  if (ids.size(0) == 0) return;
  if (ids.dtype() == DType::i32) return gather_any_width<std::int32_t>(table, ids, out, flag, stream);
  gather_any_width<std::int64_t>(table, ids, out, flag, stream);
}

bool embedding_forward_checked(const Tensor& table, const Tensor& ids, const Tensor& out, Stream stream) {
  if (ids.size(0) == 0) return false;
  Scratch scratch(kIndexFlagBytes, stream);
  auto* flag = scratch.at<long long>(0);
  clear_index_flag(flag, stream);
  embedding_forward(table, ids, out, flag, stream);
  long long record[3];
  read_index_flag(flag, record, stream);
  return record[0] >= 0;
}

bool embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable, Stream stream) {
  switch (dtable.dtype()) {
    case DType::f32: return backward_any_ids<float>(dout, ids, dtable, stream);
    case DType::f16: return backward_any_ids<__half>(dout, ids, dtable, stream);
    case DType::bf16: return backward_any_ids<__nv_bfloat16>(dout, ids, dtable, stream);
    default: fail_expected("embedding_backward", "dtable.dtype", "f32, f16 or bf16", dtable.dtype());
  }
}

void clear_index_flag(const Tensor& flag, Stream stream) { clear_index_flag(flag.data_as<long long>(), stream); }

void read_index_flag(const Tensor& flag, std::int64_t (&record)[3], Stream stream) {
  long long host[3];
  read_index_flag(flag.data_as<const long long>(), host, stream);
  for (int i = 0; i < 3; ++i) record[i] = host[i];
}

}  // namespace ignis::cuda
