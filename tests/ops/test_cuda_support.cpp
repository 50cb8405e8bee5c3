// What a CUDA build promises to run on the GPU. The op tests skip every implementation an op reports
// unsupported, and every CUDA case when no GPU answers, so a build that silently lost a dtype or its
// GPU would pass by skipping; these two tests fail instead.
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>

#include "ignis/device.h"
#include "ignis/dtype.h"
#include "ignis/ops.h"

namespace ignis {
namespace {

// scripts/gpu.sh sets IGNIS_REQUIRE_GPU for its test stage: there, no usable GPU is a failure.
TEST(CudaSupport, GpuIsUsableWhereRequired) {
  if (std::getenv("IGNIS_REQUIRE_GPU") == nullptr) GTEST_SKIP() << "IGNIS_REQUIRE_GPU is not set";
  ASSERT_EQ(IGNIS_WITH_CUDA, 1) << "IGNIS_REQUIRE_GPU is set but this build has no CUDA kernels";
  EXPECT_TRUE(cuda_available()) << "IGNIS_REQUIRE_GPU is set but no GPU is usable";
}

// The CUDA dtypes of every op (docs/ARCHITECTURE.md, README): a compile-time table, so it is checked
// in any CUDA build, with or without a GPU.
TEST(CudaSupport, EveryOpKeepsItsCudaDtypes) {
  if (IGNIS_WITH_CUDA == 0) GTEST_SKIP() << "built without CUDA";
  const Device gpu = Device::cuda(0);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_TRUE(softmax_supported(gpu, dt));
    EXPECT_TRUE(rmsnorm_supported(gpu, dt));
    EXPECT_TRUE(layernorm_supported(gpu, dt));
    EXPECT_TRUE(activation_supported(gpu, dt));
    EXPECT_TRUE(rope_supported(gpu, dt));
    EXPECT_TRUE(rope_qkv_append_supported(gpu, dt));
    EXPECT_TRUE(embedding_supported(gpu, dt));
    EXPECT_TRUE(position_embedding_supported(gpu, dt));
    EXPECT_TRUE(cross_entropy_supported(gpu, dt));
    EXPECT_TRUE(sampling_supported(gpu, dt));
    EXPECT_TRUE(attention_decode_supported(gpu, dt));
    EXPECT_TRUE(attention_scores_supported(gpu, dt));
    EXPECT_TRUE(attention_unfused_supported(gpu, dt));
    EXPECT_TRUE(gemm_supported(gpu, dt));
    EXPECT_TRUE(transpose_supported(gpu, dt));
    EXPECT_TRUE(kv_cache_supported(gpu, dt));
    for (DType to : {DType::f32, DType::f16, DType::bf16}) EXPECT_TRUE(cast_supported(gpu, dt, to));
  }
  for (DType dt : {DType::f16, DType::bf16}) EXPECT_TRUE(flash_attention_supported(gpu, dt));
  for (DType dt : {DType::f32, DType::f64}) EXPECT_TRUE(attention_naive_supported(gpu, dt));
  for (DType dt : {DType::f32, DType::bf16}) EXPECT_TRUE(fused_linear_supported(gpu, dt));
  EXPECT_TRUE(flash_attention_head_dim_supported(64));
  EXPECT_TRUE(flash_attention_head_dim_supported(128));
}

}  // namespace
}  // namespace ignis
