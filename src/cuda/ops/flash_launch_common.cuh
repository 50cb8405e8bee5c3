#pragma once
// Host code both flash attention launchers share (flash_attention.cu, flash_backward.cu): which kernel family the
// current device runs, and the mask and score fields of their launch arguments.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cuda/common/launch.cuh"
#include "cuda/ops/flash_kernel_common.cuh"
#include "ignis/attention_params.h"

namespace ignis::cuda::flash {

// Whether the current device runs the wgmma kernels: compute capability 9.0, unless the environment sets
// IGNIS_FLASH_KERNEL=mma_sync (the tests use it to cover the mma.sync kernels on Hopper). Callers ask once a device.
inline bool wgmma_kernels_chosen() {
  const char* forced = std::getenv("IGNIS_FLASH_KERNEL");
  return device_attribute(cudaDevAttrComputeCapabilityMajor) == 9 &&
         device_attribute(cudaDevAttrComputeCapabilityMinor) == 0 &&
         !(forced && std::string_view(forced) == "mma_sync");
}

// Sets the fields every flash kernel's arguments share from params (scale already resolved): the scale in the log2
// domain, the softcap's factors, the causal flag and the windows (a window wider than both sequences is no window;
// narrower ones fit in int).
template <class KernelArgs>
void set_score_args(KernelArgs& args, const AttentionParams& params, std::int64_t seqlen_q, std::int64_t seqlen_k) {
  auto window = [&](std::int64_t w) { return w < 0 || w > seqlen_q + seqlen_k ? -1 : static_cast<int>(w); };
  args.scale_log2 = static_cast<float>(params.scale * kLog2e);
  args.cap_inner = params.softcap > 0 ? static_cast<float>(params.scale / params.softcap) : 0.0f;
  args.cap_log2 = params.softcap > 0 ? static_cast<float>(params.softcap * kLog2e) : 0.0f;
  args.causal = params.causal;
  args.window_left = window(params.window_left);
  args.window_right = window(params.window_right);
}

}  // namespace ignis::cuda::flash
