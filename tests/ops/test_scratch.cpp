// ignis::cuda::Scratch (src/cuda/common/scratch.h): which requests borrow their stream's kept buffer,
// which are allocated in stream order, and that neither hands out memory another live Scratch holds.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "ignis/device.h"

#if IGNIS_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/common/scratch.h"
#endif

namespace ignis {
namespace {

#if IGNIS_WITH_CUDA
using cuda::Scratch;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// A created stream for one test, destroyed after it.
class CudaScratch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no usable GPU";
    CUDA_OK(cudaStreamCreateWithFlags(&raw_, cudaStreamNonBlocking));
    stream_.handle = raw_;
  }
  void TearDown() override {
    if (raw_ != nullptr) cudaStreamDestroy(raw_);
  }
  // Fills `bytes` of p with `value` on the stream and reads them back.
  std::vector<unsigned char> fill_and_read(void* p, std::size_t bytes, int value) {
    std::vector<unsigned char> host(bytes);
    EXPECT_EQ(cudaMemsetAsync(p, value, bytes, raw_), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(host.data(), p, bytes, cudaMemcpyDeviceToHost, raw_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(raw_), cudaSuccess);
    return host;
  }
  cudaStream_t raw_ = nullptr;
  Stream stream_;
};

TEST_F(CudaScratch, LaterCallsOnAStreamBorrowItsKeptBuffer) {
  void* first = nullptr;
  {
    const Scratch a(1024, stream_);
    EXPECT_TRUE(a.kept());
    first = a.at<char>(0);
  }
  const Scratch b(512, stream_);
  EXPECT_TRUE(b.kept());
  EXPECT_EQ(b.at<char>(0), first);
}

TEST_F(CudaScratch, TheKeptBufferGrowsToALargerRequest) {
  { const Scratch small(256, stream_); }
  constexpr std::size_t kBytes = std::size_t{4} << 20;
  const Scratch large(kBytes, stream_);
  EXPECT_TRUE(large.kept());
  const std::vector<unsigned char> back = fill_and_read(large.at<char>(0), kBytes, 0x5A);
  EXPECT_EQ(back.front(), 0x5A);
  EXPECT_EQ(back.back(), 0x5A);
}

TEST_F(CudaScratch, ASecondLiveScratchOnTheStreamGetsItsOwnMemory) {
  const Scratch outer(4096, stream_);
  const Scratch inner(4096, stream_);
  EXPECT_TRUE(outer.kept());
  EXPECT_FALSE(inner.kept());
  EXPECT_NE(inner.at<char>(0), outer.at<char>(0));
  fill_and_read(outer.at<char>(0), 4096, 0x11);
  EXPECT_EQ(fill_and_read(inner.at<char>(0), 4096, 0x22).back(), 0x22);
  std::vector<unsigned char> host(4096);
  CUDA_OK(cudaMemcpy(host.data(), outer.at<char>(0), host.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host.front(), 0x11);
  EXPECT_EQ(host.back(), 0x11);
}

TEST_F(CudaScratch, EachStreamKeepsItsOwnBuffer) {
  cudaStream_t other_raw = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&other_raw, cudaStreamNonBlocking));
  const Stream other{other_raw};
  {
    const Scratch here(1024, stream_);
    const Scratch there(1024, other);
    EXPECT_TRUE(here.kept());
    EXPECT_TRUE(there.kept());
    EXPECT_NE(here.at<char>(0), there.at<char>(0));
  }
  CUDA_OK(cudaStreamDestroy(other_raw));
}

TEST_F(CudaScratch, LargeRequestsAndThePerThreadStreamAreNotKept) {
  const Scratch large(cuda::kKeptScratchBytes + 1, stream_);
  EXPECT_FALSE(large.kept());
  const Scratch per_thread(1024, Stream{cudaStreamPerThread});
  EXPECT_FALSE(per_thread.kept());
}

// A captured graph must own its scratch: the kept buffer could be regrown (and freed) before a replay.
TEST_F(CudaScratch, UnderCaptureTheGraphOwnsItsScratch) {
  { const Scratch warm(1024, stream_); }
  CUDA_OK(cudaStreamBeginCapture(raw_, cudaStreamCaptureModeThreadLocal));
  bool kept_in_capture = true;
  {
    const Scratch captured(1024, stream_);
    kept_in_capture = captured.kept();
    cudaMemsetAsync(captured.at<char>(0), 0x33, 1024, raw_);
  }
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(raw_, &graph));
  EXPECT_FALSE(kept_in_capture);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, raw_));
  CUDA_OK(cudaGraphLaunch(exec, raw_));
  CUDA_OK(cudaStreamSynchronize(raw_));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  const Scratch after(1024, stream_);
  EXPECT_TRUE(after.kept());
}
#endif

}  // namespace
}  // namespace ignis
