// Diagnostic, not part of the library: what a launch costs on the GPU's own timeline, measured the
// way bench_ops.py times a call (a spin kernel first, so the host's launch work is hidden, then CUDA
// events around the call). Compares a plain launch with a cooperative one, with and without the
// ~200 KB of dynamic shared memory the norm backward's blocks take, and a grid barrier inside; and
// what a stream-ordered scratch allocation (cudaMallocAsync before the launch, cudaFreeAsync after it,
// as ignis::cuda::Scratch did before session 27) adds, each half inside the events alone and both
// together; and a cudaMemsetAsync of 4 KB before the launch (as the sampling workspaces take).
// Built by hand, run on the GPU machine from the repo root:
//   nvcc -std=c++17 -O2 -arch=sm_90a -o /tmp/launch_probe bench/launch_probe.cu && /tmp/launch_probe
// Prints one line a configuration: the median and 10th percentile of the event time in us.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe_check.h"

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Each thread writes one word, so the kernel does some memory work but no real streaming.
// out: [gridDim.x * blockDim.x]
__global__ void touch(unsigned* out, int grid_sync) {
  extern __shared__ unsigned smem[];
  smem[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (grid_sync) cooperative_groups::this_grid().sync();
  out[blockIdx.x * blockDim.x + threadIdx.x] = smem[(threadIdx.x + 1) % blockDim.x];
}

// Where a stream-ordered scratch allocation sits relative to the timed events.
enum class Scratch { none, both_inside, malloc_inside, free_inside, memset_inside };

struct Config {
  const char* name;
  bool cooperative;
  int smem;
  int grid_sync;
  Scratch scratch = Scratch::none;
};

constexpr size_t kScratchBytes = 132 * 2 * 4096 * sizeof(float);  // LayerNorm bf16 4096's partial rows

// Prints the median and 10th percentile event time of configuration c.
void print_times(const Config& c, unsigned* out, int blocks, int threads, cudaStream_t s, void* zeroed) {
  CHECK(cudaFuncSetAttribute(touch, cudaFuncAttributeMaxDynamicSharedMemorySize, c.smem));
  CHECK(cudaFuncSetAttribute(touch, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  constexpr int kReps = 200;
  std::vector<cudaEvent_t> start(kReps), end(kReps);
  for (int i = 0; i < kReps; ++i) {
    CHECK(cudaEventCreate(&start[i]));
    CHECK(cudaEventCreate(&end[i]));
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = c.smem;
  config.stream = s;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  config.attrs = &attribute;
  config.numAttrs = c.cooperative ? 1 : 0;
  for (int i = 0; i < kReps; ++i) {
    void* scratch = nullptr;
    if (c.scratch == Scratch::free_inside) CHECK(cudaMallocAsync(&scratch, kScratchBytes, s));
    spin<<<1, 1, 0, s>>>(200000);
    CHECK(cudaEventRecord(start[i], s));
    if (c.scratch == Scratch::both_inside || c.scratch == Scratch::malloc_inside)
      CHECK(cudaMallocAsync(&scratch, kScratchBytes, s));
    if (c.scratch == Scratch::memset_inside) CHECK(cudaMemsetAsync(zeroed, 0, 4096, s));
    CHECK(cudaLaunchKernelEx(&config, touch, out, c.grid_sync));
    if (c.scratch == Scratch::both_inside || c.scratch == Scratch::free_inside) CHECK(cudaFreeAsync(scratch, s));
    CHECK(cudaEventRecord(end[i], s));
    if (c.scratch == Scratch::malloc_inside) CHECK(cudaFreeAsync(scratch, s));
  }
  CHECK(cudaStreamSynchronize(s));
  std::vector<float> us;
  for (int i = 10; i < kReps; ++i) {
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, start[i], end[i]));
    us.push_back(ms * 1000.0f);
  }
  std::sort(us.begin(), us.end());
  for (int i = 0; i < kReps; ++i) {
    CHECK(cudaEventDestroy(start[i]));
    CHECK(cudaEventDestroy(end[i]));
  }
  std::printf("%-46s median %6.2f us  p10 %6.2f us\n", c.name, us[us.size() / 2], us[us.size() / 10]);
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* out = nullptr;
  CHECK(cudaMalloc(&out, static_cast<size_t>(sms) * 2 * 256 * sizeof(unsigned)));
  const int big = 200 * 1024;
  const Config configs[] = {
      {"plain, 4 KB smem", false, 4096, 0},
      {"cooperative, 4 KB smem", true, 4096, 0},
      {"plain, 200 KB smem", false, big, 0},
      {"cooperative, 200 KB smem", true, big, 0},
      {"cooperative, 200 KB smem, grid sync", true, big, 1},
      {"plain, 4 KB smem (again)", false, 4096, 0},
      {"plain, 4 KB smem, malloc+free async inside", false, 4096, 0, Scratch::both_inside},
      {"plain, 4 KB smem, malloc async inside", false, 4096, 0, Scratch::malloc_inside},
      {"plain, 4 KB smem, free async inside", false, 4096, 0, Scratch::free_inside},
      {"coop 200 KB, grid sync, malloc+free inside", true, big, 1, Scratch::both_inside},
      {"coop 200 KB, grid sync (again)", true, big, 1},
      {"plain, 4 KB smem, 4 KB memset async inside", false, 4096, 0, Scratch::memset_inside},
  };
  std::printf("%d blocks of 256 threads (one an SM)\n", sms);
  void* zeroed = nullptr;
  CHECK(cudaMalloc(&zeroed, 4096));
  for (const Config& c : configs) print_times(c, out, sms, 256, s, zeroed);
  CHECK(cudaFree(zeroed));
  CHECK(cudaFree(out));
  return 0;
}
