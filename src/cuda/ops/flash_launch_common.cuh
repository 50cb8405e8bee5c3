#pragma once
// Host code both flash attention launchers share (flash_attention.cu, flash_backward.cu): which kernel family the
// current device runs, the mask and score fields of their launch arguments, and the Hopper kernels' tensor maps.
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cuda/common/launch.cuh"
#include "cuda/ops/flash_kernel_common.cuh"
#include "ignis/attention_params.h"
#include "ignis/error.h"
#include "ignis/tensor.h"

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

// A 4-D tensor map over `base`: [batch, rows, heads, cols] of `type` (dims cols, heads, rows, batch innermost
// first), boxes of box_cols columns x 1 head x box_rows rows x 1 sequence, 128-byte swizzled (box_cols times the
// element size must be 128 bytes or less); rows past the tensor read as zeros and are skipped by stores.
inline CUtensorMap encode_tensor_map(const void* base, CUtensorMapDataType type, int element_bytes,
                                     std::int64_t batch, std::int64_t rows, std::int64_t heads, std::int64_t cols,
                                     int box_cols, int box_rows) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    IGNIS_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(batch)};
  const cuuint64_t bytes = static_cast<cuuint64_t>(element_bytes);
  const cuuint64_t strides[3] = {dims[0] * bytes, dims[0] * dims[1] * bytes, dims[0] * dims[1] * dims[2] * bytes};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_cols), 1, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map{};
  const CUresult result =
      encode(&map, type, 4, const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) throw Error("flash attention: cuTensorMapEncodeTiled failed");
  return map;
}

// The tensor map over a bf16 or f16 t: [batch, rows, heads, D], boxes of 64 columns x box_rows rows.
inline CUtensorMap tensor_map(const Tensor& t, int box_rows) {
  return encode_tensor_map(
      t.data(), t.dtype() == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      t.size(0), t.size(1), t.size(2), t.size(3), 64, box_rows);
}

}  // namespace ignis::cuda::flash
