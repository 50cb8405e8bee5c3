// Diagnostic, not part of the library: how fast and how evenly the SMs stream rows the way the norm
// backward does (a group of rows g, g + G, ... a block), by fill method (a shared-memory ring filled
// by bulk copies or cp.async, plain loads, rows loaded ahead into registers) and bytes in flight,
// with and without writing a row of dx. Built by hand, run on the GPU machine from the repo root:
//   nvcc -std=c++17 -O2 -arch=sm_90a -I src -o /tmp/stream_probe bench/stream_probe.cu && /tmp/stream_probe
// `stream_probe ring` runs only the configurations that locate the ring's loss (and `mixed`: x
// through the ring, dy loaded a row ahead into registers); `stream_probe align` the ring 0-128 bytes
// past a 128-byte line (the "ring" column: its shared address modulo 128).
// Prints one line a configuration: GB/s over the whole span (x and dy read, dx written) and from
// CUDA events, per-SM GB/s (min, 10th percentile, median, max), when the median and the last block
// ended (us), and the slowest SMs. Results: docs/PERF_NOTES.md session 10.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/common/bulk_copy.cuh"

#include "probe_check.h"

using ignis::cuda::bulk_copy_to_shared;
using ignis::cuda::expect_bytes;
using ignis::cuda::fence_before_bulk_copies;
using ignis::cuda::init_landing_barrier;
using ignis::cuda::wait_landed;

__device__ unsigned smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Record {
  unsigned long long start, end;
  unsigned sm;
  unsigned ring;  // the ring's shared-memory address
};

enum Fill { kBulk = 0, kCpAsync = 1, kLoads = 2, kRegs = 3, kMixed = 4 };

// Block b streams rows b, b + gridDim.x, ... of x and dy (row_packs 16-byte packs each) through a
// ring of `stages` shared-memory stages, reads each landed row (xor of its packs, as the backward
// reads its stage), takes one block barrier a row, and with `write` stores a row of dx. kBulk:
// thread 0 refills the stage after the barrier (the backward's bulk path); kCpAsync: each thread
// refills its own packs before waiting (the backward's cp.async path); kLoads: no stages, each
// thread loads its packs of the row into registers. The ring starts `shift` bytes (a multiple of 16) into the
// dynamic shared memory, to see what its alignment costs.
__global__ void __launch_bounds__(1024) stream_rows(const uint4* x, const uint4* dy, uint4* dx, long long rows,
                                                    int row_packs, int stages, int fill, int write, int shift,
                                                    Record* record) {
  extern __shared__ __align__(128) uint4 dynamic_smem[];
  uint4* cache = dynamic_smem + shift / 16;  // [stages][x, dy][row_packs]
  __shared__ unsigned long long landed[8];
  __shared__ unsigned long long t0;
  const int tid = threadIdx.x, threads = blockDim.x;
  const long long n = (rows - blockIdx.x + gridDim.x - 1) / gridDim.x;
  const long long stride = static_cast<long long>(gridDim.x) * row_packs;
  const uint4* xb = x + blockIdx.x * static_cast<long long>(row_packs);
  const uint4* gb = dy + blockIdx.x * static_cast<long long>(row_packs);
  if (tid == 0) {
    t0 = now_ns();
    for (int s = 0; s < stages; ++s) init_landing_barrier(&landed[s], 1);
  }
  __syncthreads();
  int fill_stage = 0, read_stage = 0;
  unsigned parity = 0;
  const auto copy = [&](long long i) {
    uint4* stage = cache + fill_stage * 2 * row_packs;
    if (fill == kBulk || fill == kMixed) {
      if (tid == 0 && i < n) {
        const unsigned bytes = row_packs * 16u;
        expect_bytes(&landed[fill_stage], (fill == kMixed ? 1 : 2) * bytes);
        fence_before_bulk_copies();
        bulk_copy_to_shared(stage, xb + i * stride, bytes, &landed[fill_stage]);
        if (fill == kBulk) bulk_copy_to_shared(stage + row_packs, gb + i * stride, bytes, &landed[fill_stage]);
      }
    } else {
      if (i < n)
        for (int k = tid; k < row_packs; k += threads) {
          const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(stage + k));
          const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(stage + row_packs + k));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(xb + i * stride + k) : "memory");
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(b), "l"(gb + i * stride + k) : "memory");
        }
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    fill_stage = fill_stage + 1 == stages ? 0 : fill_stage + 1;
  };
  if (fill != kLoads)
    for (int i = 0; i < stages - 1; ++i) copy(i);
  // kMixed: x through the ring (bulk copies), dy loaded a row ahead into registers (two packs a
  // thread: rows of 2 * blockDim.x packs).
  uint4 dy_row[2] = {}, dy_next[2] = {};
  if (fill == kMixed && n > 0)
    for (int j = 0; j < 2; ++j) dy_row[j] = gb[tid + j * threads];
  unsigned acc = 0;
  for (long long i = 0; i < n; ++i) {
    unsigned v = 0;
    if (fill == kMixed) {
      if (i + 1 < n)
        for (int j = 0; j < 2; ++j) dy_next[j] = gb[(i + 1) * stride + tid + j * threads];
      wait_landed(&landed[read_stage], parity);
      const uint4* stage = cache + read_stage * 2 * row_packs;
      for (int j = 0; j < 2; ++j) {
        const uint4 a = stage[tid + j * threads];
        v ^= a.x ^ a.w ^ dy_row[j].y ^ dy_row[j].z;
        dy_row[j] = dy_next[j];
      }
      if (++read_stage == stages) {
        read_stage = 0;
        parity ^= 1;
      }
    } else if (fill == kLoads) {
      for (int k = tid; k < row_packs; k += threads) {
        const uint4 a = xb[i * stride + k], b = gb[i * stride + k];
        v ^= a.x ^ a.w ^ b.y ^ b.z;
      }
    } else {
      if (fill == kBulk) {
        wait_landed(&landed[read_stage], parity);
      } else {
        copy(i + stages - 1);
        switch (stages) {  // at most stages - 1 groups still in flight: row i landed
          case 2: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
          case 3: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
          case 4: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
          default: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
        }  // each thread reads only the packs it copied itself: no barrier
      }
      const uint4* stage = cache + read_stage * 2 * row_packs;
      for (int k = tid; k < row_packs; k += threads) {
        const uint4 a = stage[k], b = stage[row_packs + k];
        v ^= a.x ^ a.w ^ b.y ^ b.z;
      }
      if (++read_stage == stages) {
        read_stage = 0;
        parity ^= 1;
      }
    }
    __syncthreads();  // the row's reduction barrier
    if (fill == kBulk || fill == kMixed) copy(i + stages - 1);
    acc ^= v;
    if (write)
      for (int k = tid; k < row_packs; k += threads)
        dx[blockIdx.x * static_cast<long long>(row_packs) + i * stride + k] = make_uint4(v, k, 0, acc);
  }
  __syncthreads();
  if (tid == 0) record[blockIdx.x] = {t0, now_ns(), smid(), static_cast<unsigned>(__cvta_generic_to_shared(cache))};
}

// Register rows: each subgroup of `row_packs` threads owns rows (its own stride through the tensor),
// a thread one 16-byte pack of x and of dy a row, loaded D rows ahead into registers (no shared
// memory stages); one named barrier a row for the subgroup's reduction, then a pack of dx written.
template <int D>
__global__ void __launch_bounds__(1024) stream_regs(const uint4* x, const uint4* dy, uint4* dx, long long rows,
                                                     int row_packs, int write, Record* record) {
  __shared__ unsigned slots[2][32];
  __shared__ unsigned long long t0;
  const int tid = threadIdx.x;
  const int subgroups = blockDim.x / row_packs, sub = tid / row_packs, k = tid % row_packs;
  const long long group = blockIdx.x * static_cast<long long>(subgroups) + sub;
  const long long groups = static_cast<long long>(gridDim.x) * subgroups;
  const long long n = group < rows ? (rows - group + groups - 1) / groups : 0;
  if (tid == 0) t0 = now_ns();
  __syncthreads();
  uint4 xr[D + 1], gr[D + 1];
  const auto load = [&](long long i, uint4& a, uint4& b) {
    if (i < n) {
      const long long at = (group + i * groups) * row_packs + k;
      a = x[at];
      b = dy[at];
    }
  };
#pragma unroll
  for (int s = 0; s < D; ++s) load(s, xr[s], gr[s]);
  unsigned acc = 0;
  int parity = 0;
  for (long long base = 0; base < n; base += D + 1) {
#pragma unroll
    for (int s = 0; s <= D; ++s) {
      const long long i = base + s;
      if (i >= n) break;
      load(i + D, xr[(s + D) % (D + 1)], gr[(s + D) % (D + 1)]);
      unsigned v = xr[s].x ^ xr[s].w ^ gr[s].y ^ gr[s].z;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v ^= __shfl_xor_sync(0xffffffffu, v, o);
      unsigned* slot = slots[parity] + (sub * row_packs) / 32;
      if (tid % 32 == 0) slot[k / 32] = v;
      asm volatile("bar.sync %0, %1;" ::"r"(1 + sub), "r"(row_packs) : "memory");
      v = slot[0] ^ slot[row_packs / 32 - 1];
      parity ^= 1;
      acc ^= v;
      if (write) dx[(group + i * groups) * row_packs + k] = make_uint4(v, k, 0, acc);
    }
  }
  __syncthreads();
  if (tid == 0) record[blockIdx.x] = {t0, now_ns(), smid(), 0};
}

int main(int argc, char** argv) {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs\n", prop.name, sms);
  const long long tensor_bytes = 256LL << 20;
  uint4 *x = nullptr, *dy = nullptr, *dx = nullptr;
  CHECK(cudaMalloc(&x, tensor_bytes));
  CHECK(cudaMalloc(&dy, tensor_bytes));
  CHECK(cudaMalloc(&dx, tensor_bytes));
  CHECK(cudaMemset(x, 1, tensor_bytes));
  CHECK(cudaMemset(dy, 2, tensor_bytes));
  Record* d_record = nullptr;
  CHECK(cudaMalloc(&d_record, 8 * sms * sizeof(Record)));
  CHECK(cudaFuncSetAttribute(stream_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  struct Config {
    int fill, stages, row_bytes, blocks_per_sm, write, threads = 256, shift = 0;
  };
  const char* fill_name[] = {"bulk", "cp.async", "loads", "regs", "mixed"};
  std::vector<Config> configs;
  if (argc > 1 && std::string(argv[1]) == "align") {
    // What the ring's alignment costs: the norm backward's shapes (8 KB rows: bf16 4096, one block an SM, 3 stages;
    // 16 KB rows: bf16 8192) with the ring 0-128 bytes past a 128-byte line.
    for (int row_bytes : {8192, 16384})
      for (int fill : {kBulk, kCpAsync})
        for (int shift : {0, 16, 32, 64, 128}) configs.push_back({fill, 3, row_bytes, 1, 1, 256, shift});
  } else if (argc > 1 && std::string(argv[1]) == "ring") {
    // Where the ring loses against plain loads: one block an SM, or the copy count? (x, dy read and
    // dx written; 8 KB rows unless said.)
    configs = {{kBulk, 3, 8192, 1, 1},   {kLoads, 1, 8192, 4, 1},  {kBulk, 2, 8192, 4, 1},
               {kBulk, 3, 8192, 4, 1},   {kCpAsync, 2, 8192, 4, 1}, {kCpAsync, 3, 8192, 4, 1},
               {kBulk, 3, 32768, 1, 1},  {kCpAsync, 3, 32768, 1, 1}, {kLoads, 1, 32768, 1, 1},
               {kLoads, 1, 32768, 2, 1},  {kMixed, 3, 8192, 1, 1},  {kMixed, 4, 8192, 1, 1},
               {kMixed, 3, 8192, 2, 1}};
  } else {
    for (int write : {1, 0})
      for (int row_bytes : {8192, 16384}) {
        for (int stages : {2, 3, 4, 6})
          for (int fill : {kBulk, kCpAsync})
            if (stages * 2 * row_bytes <= 200 * 1024) configs.push_back({fill, stages, row_bytes, 1, write});
        if (row_bytes == 8192) configs.push_back({kBulk, 3, row_bytes, 2, write});
        for (int fill : {kBulk, kCpAsync}) configs.push_back({fill, 3, row_bytes, 1, write, row_bytes / 16});
        for (int per_sm : {1, 2, 4, 8}) configs.push_back({kLoads, 1, row_bytes, per_sm, write});
        for (int depth : {1, 2, 3}) configs.push_back({kRegs, depth, row_bytes, 1, write});
      }
  }
  std::printf("%-9s %6s %6s %4s %5s %4s %4s | %7s %7s | %6s %6s %6s %6s | %6s %6s | %s\n", "fill", "stages", "row",
              "b/SM", "write", "thr", "ring", "GB/s", "event", "min", "p10", "med", "max", "endmed", "endmax",
              "slowest SMs (by rate)");
  for (const Config& c : configs) {
    const int blocks = c.blocks_per_sm * sms;
    const int row_packs = c.row_bytes / 16;
    const long long rows = tensor_bytes / c.row_bytes;
    const int smem = c.fill == kLoads ? 0 : c.stages * 2 * c.row_bytes + c.shift;
    std::vector<Record> rec(blocks);
    double event_gbs = 0, span_gbs = 0, end_med = 0, end_max = 0;
    std::vector<double> rate(blocks);
    for (int round = 0; round < 3; ++round) {
      CHECK(cudaEventRecord(e0));
      if (c.fill == kRegs) {
        const int threads = row_packs <= 1024 ? 1024 / row_packs * row_packs : 0;
        auto kernel = c.stages == 1 ? stream_regs<1> : c.stages == 2 ? stream_regs<2> : stream_regs<3>;
        kernel<<<blocks, threads>>>(x, dy, dx, rows, row_packs, c.write, d_record);
      } else {
        stream_rows<<<blocks, c.threads, smem>>>(x, dy, dx, rows, row_packs, c.stages, c.fill, c.write, c.shift,
                                                 d_record);
      }
      CHECK(cudaEventRecord(e1));
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      CHECK(cudaMemcpy(rec.data(), d_record, blocks * sizeof(Record), cudaMemcpyDeviceToHost));
      const double bytes = static_cast<double>(tensor_bytes) * (2 + c.write);
      unsigned long long first = ~0ULL, last = 0;
      for (const Record& r : rec) {
        first = std::min(first, r.start);
        last = std::max(last, r.end);
      }
      std::vector<double> ends;
      for (int b = 0; b < blocks; ++b) {
        const long long n = (rows - b + blocks - 1) / blocks;
        rate[b] = static_cast<double>(n) * c.row_bytes * (2 + c.write) / (rec[b].end - rec[b].start);
        ends.push_back((rec[b].end - first) * 1e-3);
      }
      std::sort(ends.begin(), ends.end());
      if (round == 2) {  // the last round; the first two warm up
        event_gbs = bytes / (ms * 1e6);
        span_gbs = bytes / (last - first);
        end_med = ends[ends.size() / 2];
        end_max = ends.back();
      }
    }
    // Per-SM rate: the sum over that SM's blocks.
    std::vector<double> sm_rate(1024, 0.0);
    for (int b = 0; b < blocks; ++b) sm_rate[rec[b].sm] += rate[b];
    std::vector<std::pair<double, int>> by_rate;
    for (int s = 0; s < 1024; ++s)
      if (sm_rate[s] > 0) by_rate.push_back({sm_rate[s], s});
    std::sort(by_rate.begin(), by_rate.end());
    const auto at = [&](double q) { return by_rate[static_cast<size_t>(q * (by_rate.size() - 1))].first; };
    std::string slow;
    for (int i = 0; i < 8 && i < static_cast<int>(by_rate.size()); ++i)
      slow += std::to_string(by_rate[i].second) + " ";
    std::printf("%-9s %6d %6d %4d %5d %4d %4u | %7.0f %7.0f | %6.1f %6.1f %6.1f %6.1f | %6.1f %6.1f | %s\n",
                fill_name[c.fill], c.fill == kLoads ? 0 : c.stages, c.row_bytes, c.blocks_per_sm, c.write,
                c.fill == kRegs ? 1024 : c.threads, rec[0].ring % 128, span_gbs, event_gbs, at(0), at(0.1), at(0.5),
                at(1.0), end_med, end_max, slow.c_str());
  }
  return 0;
}
