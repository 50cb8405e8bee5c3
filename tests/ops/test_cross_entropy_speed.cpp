// Cross-entropy at LLM vocabulary sizes must run at memory speed: its traffic (one read of the
// logits for the statistics, one read plus one write for dlogits) against a device-to-device copy
// of the same tensor, timed the same way. CUDA only; skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "harness/op_harness.h"
#include "ignis/ops.h"

#if IGNIS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace ignis {
namespace {

template <class Fn>
double seconds_per_call(Fn&& fn) {
  for (int i = 0; i < 3; ++i) fn();
  synchronize();
  constexpr int kCalls = 10;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) fn();
  synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kCalls;
}

TEST(CrossEntropySpeed, LargeVocabulariesRunAtMemorySpeed) {
#if IGNIS_WITH_CUDA
  if (!cuda_available()) GTEST_SKIP() << "no usable GPU";
  const Device gpu = Device::cuda(0);
  struct Shape2 {
    std::int64_t n, vocab;
    DType dtype;
  };
  for (const Shape2 s : {Shape2{16384, 32000, DType::bf16}, Shape2{4096, 128256, DType::bf16},
                         Shape2{8192, 50257, DType::bf16}, Shape2{4096, 32000, DType::f32}}) {
    Tensor logits = test::make_poisoned({s.n, s.vocab}, s.dtype, gpu);
    ASSERT_EQ(cudaMemset(logits.data(), 0, logits.nbytes()), cudaSuccess);  // finite logits
    Tensor dlogits = Tensor::empty({s.n, s.vocab}, s.dtype, gpu);
    Tensor targets = test::make_tensor(std::vector<double>(s.n, 1.0), {s.n}, DType::i32, gpu);
    Tensor loss = Tensor::empty({1}, DType::f32, gpu);
    const double op = seconds_per_call([&] { cross_entropy(logits, targets, -1, loss, dlogits); });
    const double copy = seconds_per_call([&] {
      ASSERT_EQ(cudaMemcpyAsync(dlogits.data(), logits.data(), logits.nbytes(), cudaMemcpyDeviceToDevice), cudaSuccess);
    });
    const double bytes = static_cast<double>(logits.nbytes());
    const double op_bw = 3.0 * bytes / op, copy_bw = 2.0 * bytes / copy;
    std::printf("cross_entropy %s n %lld vocab %lld: %.0f us, %.0f GB/s; copy %.0f GB/s; ratio %.2f\n",
                std::string(dtype_name(s.dtype)).c_str(), static_cast<long long>(s.n),
                static_cast<long long>(s.vocab), op * 1e6, op_bw / 1e9, copy_bw / 1e9, op_bw / copy_bw);
    EXPECT_GE(op_bw / copy_bw, 0.8) << "vocab " << s.vocab << " " << s.dtype;
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace ignis
