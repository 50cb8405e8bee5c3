#include "engine/cuda_linear.h"

#include <map>
#include <tuple>

#include "ignis/error.h"

#if IGNIS_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "ignis/ops/position_embedding.h"

#define IGNIS_CUBLAS_CHECK(call)                                                                          \
  do {                                                                                                    \
    const cublasStatus_t ignis_status_ = (call);                                                          \
    if (ignis_status_ != CUBLAS_STATUS_SUCCESS)                                                           \
      throw ::ignis::Error(::ignis::detail::concat(#call, ": ", cublasLtGetStatusString(ignis_status_))); \
  } while (0)
#endif

namespace ignis::engine {

#if IGNIS_WITH_CUDA

namespace {

// 32 MiB, what cuBLASLt asks for on Hopper.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
constexpr std::uintptr_t kAlignment = 256;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool fused_bias = false;  // the bias rides in the epilogue

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

using PlanKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, DType, bool>;  // out, in, m, dtype, bias

}  // namespace

struct CublasLt::Impl {
  cublasLtHandle_t handle = nullptr;
  Tensor workspace;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;

  // Column-major view of the row-major product: y^T [out, m] = W [out, in] (stored as a
  // column-major [in, out], hence op T) times x^T [in, m]. The bias runs along y^T's rows, the
  // vector cuBLASLt's bias epilogue broadcasts over columns; its pointer is set per call.
  const Plan& plan(std::int64_t out, std::int64_t in, std::int64_t m, DType dtype, bool bias) {
    std::unique_ptr<Plan>& slot = plans[PlanKey{out, in, m, dtype, bias}];
    if (slot) return *slot;
    // Should no algorithm take the bias epilogue for this shape, the bias is added by a kernel.
    if (bias) slot = make_plan(out, in, m, dtype, true);
    if (!slot) slot = make_plan(out, in, m, dtype, false);
    if (!slot)
      throw Error(detail::concat("CublasLt::linear: no cuBLASLt algorithm for [", m, ", ", in, "] x [", out, ", ", in,
                                 "]^T in ", dtype));
    return *slot;
  }

  // Null when the heuristic offers no algorithm (or, for the bias epilogue, rejects it).
  std::unique_ptr<Plan> make_plan(std::int64_t out, std::int64_t in, std::int64_t m, DType dtype, bool bias) {
    auto p = std::make_unique<Plan>();
    p->fused_bias = bias;
    const cudaDataType_t ab = dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    IGNIS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    IGNIS_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
    IGNIS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
    if (bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_32F;
      IGNIS_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      IGNIS_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    }
    const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
    IGNIS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, ab, u(in), u(out), in));
    IGNIS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, ab, u(in), u(m), in));
    IGNIS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, u(out), u(m), out));
    cublasLtMatmulPreference_t preference = nullptr;
    IGNIS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const std::uint64_t workspace_bytes = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulAlgoGetHeuristic(handle, p->desc, p->a, p->b, p->c, p->c, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    if (bias && status == CUBLAS_STATUS_NOT_SUPPORTED) return nullptr;
    IGNIS_CUBLAS_CHECK(status);
    if (found == 0) return nullptr;
    p->algo = result.algo;
    return p;
  }
};

CublasLt::CublasLt(Device device) : impl_(std::make_unique<Impl>()) {
  check_arg(device.is_cuda(), "CublasLt", "device", "cuda", device);
  IGNIS_CUDA_CHECK(cudaSetDevice(device.index));
  IGNIS_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  impl_->workspace = Tensor::empty({static_cast<std::int64_t>(kWorkspaceBytes)}, DType::u8, device);
}

CublasLt::~CublasLt() {
  impl_->plans.clear();
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

void CublasLt::linear(const Tensor& w, const void* x, float* y, std::int64_t m, float beta, Stream stream,
                      const Tensor* bias) {
  constexpr const char* where = "CublasLt::linear";
  check_dim(w, 2, where, "w");
  check_contiguous(w, where, "w");
  check_arg(w.dtype() == DType::f32 || w.dtype() == DType::bf16, where, "w.dtype", "f32 or bf16", w.dtype());
  check_arg(m > 0, where, "m", "> 0", m);
  for (const auto& [p, name] : {std::pair{x, "x"}, std::pair{static_cast<const void*>(y), "y"}})
    check_arg(reinterpret_cast<std::uintptr_t>(p) % kAlignment == 0, where, name, "a 256-byte aligned pointer",
              reinterpret_cast<std::uintptr_t>(p) % kAlignment);
  if (bias != nullptr) {
    check_shape(*bias, {w.size(0)}, where, "bias");
    check_dtype(*bias, DType::f32, where, "bias");
    check_device(*bias, w.device(), where, "bias");
    check_contiguous(*bias, where, "bias");
    check_arg(reinterpret_cast<std::uintptr_t>(bias->data()) % kAlignment == 0, where, "bias",
              "a 256-byte aligned pointer", reinterpret_cast<std::uintptr_t>(bias->data()) % kAlignment);
  }
  const Plan& p = impl_->plan(w.size(0), w.size(1), m, w.dtype(), bias != nullptr);
  if (p.fused_bias) {
    // Read when the matmul is enqueued, so one plan serves every layer's bias (and a captured
    // graph keeps the pointer of its own call).
    const void* pointer = bias->data();
    IGNIS_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer, sizeof(pointer)));
  }
  const float alpha = 1.0f;
  IGNIS_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, p.desc, &alpha, w.data(), p.a, x, p.b, &beta, y, p.c, y, p.c,
                                    &p.algo, impl_->workspace.data(), kWorkspaceBytes,
                                    static_cast<cudaStream_t>(stream.handle)));
  // Every row of y is its own sequence at position 0 of a one-row table: y[r] += bias.
  if (bias != nullptr && !p.fused_bias)
    position_embedding_add(Tensor::view(y, DType::f32, w.device(), {m, 1, w.size(0)}), bias->reshape({1, w.size(0)}),
                           0, std::nullopt, stream);
}

#else

struct CublasLt::Impl {};

CublasLt::CublasLt(Device device) {
  fail_expected("CublasLt", "device", "cpu (ignis was built without CUDA)", device);
}

CublasLt::~CublasLt() = default;

void CublasLt::linear(const Tensor&, const void*, float*, std::int64_t, float, Stream, const Tensor*) {
  throw Error("CublasLt::linear: ignis was built without CUDA");
}

#endif

}  // namespace ignis::engine
