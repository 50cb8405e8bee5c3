// Diagnostic, not part of the library: what each op the engine's CUDA prefill calls costs the host,
// per call, at SmolLM2-135M's shapes. A 1024-token bf16 prefill is ~420 launches whose kernels sum
// to ~3.3 ms (ncu); it took 5-8 ms, and a 128-token one as long, until argument checks stopped
// formatting their messages on success (PERF_NOTES session 31): the host set the pace. For
// each op: one warm-up call, then `calls` calls back to back, timing the enqueue (host clock, no
// sync) and the whole (host clock after a sync), per call, at n = 16 tokens (the GPU idles: the
// enqueue is the host's cost) and n = 1024 (a prompt).
// Built with the project (target ignis_host_cost); run on the GPU machine:
//   ninja -C build ignis_host_cost && build/bench/ignis_host_cost [calls]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "engine/cuda_linear.h"
#include "ignis/ops/activation.h"
#include "ignis/ops/cast.h"
#include "ignis/ops/embedding.h"
#include "ignis/ops/flash_attention.h"
#include "ignis/ops/norm.h"
#include "ignis/ops/rope_append.h"
#include "ignis/ops/sampling.h"
#include "ignis/tensor.h"
#include "probe_check.h"

namespace {

using Clock = std::chrono::steady_clock;

__global__ void empty_kernel() {}

// SmolLM2-135M.
constexpr std::int64_t kDim = 576, kHeads = 9, kKvHeads = 3, kHeadDim = 64, kFfn = 1536, kVocab = 49152;
constexpr std::int64_t kMaxSeq = 2048;

double micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// One op at one token count: prints the enqueue and whole time per call, in us.
void time_op(const char* name, std::int64_t n, int calls, cudaStream_t stream, const std::function<void()>& op) {
  op();
  CHECK(cudaStreamSynchronize(stream));
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < calls; ++i) op();
  const Clock::time_point enqueued = Clock::now();
  CHECK(cudaStreamSynchronize(stream));
  const Clock::time_point done = Clock::now();
  std::printf("| %s | %lld | %.2f | %.2f |\n", name, static_cast<long long>(n), micros(start, enqueued) / calls,
              micros(start, done) / calls);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ignis;
  const int calls = argc > 1 ? std::atoi(argv[1]) : 400;
  const Device gpu = Device::cuda(0);
  cudaStream_t raw = nullptr;
  CHECK(cudaStreamCreate(&raw));
  const Stream stream{raw};
  engine::CublasLt lt(gpu);

  std::printf("| op | tokens | enqueue us/call | whole us/call |\n| --- | ---: | ---: | ---: |\n");
  for (const std::int64_t n : {16LL, 1024LL}) {
    const Tensor x = Tensor::empty({n, kDim}, DType::f32, gpu);
    const Tensor xn = Tensor::empty({n, kDim}, DType::f32, gpu);
    const Tensor xb = Tensor::empty({n, kDim}, DType::bf16, gpu);
    const Tensor norm_w = Tensor::empty({kDim}, DType::f32, gpu);
    const Tensor w = Tensor::empty({kDim, kDim}, DType::bf16, gpu);
    const Tensor y = Tensor::empty({n, kDim}, DType::f32, gpu);
    const std::int64_t qkv_width = (kHeads + 2 * kKvHeads) * kHeadDim;
    const Tensor qkv = Tensor::empty({n, qkv_width}, DType::f32, gpu);
    const Tensor inv_freq = Tensor::empty({kHeadDim / 2}, DType::f32, gpu);
    const Tensor q = Tensor::empty({1, n, kHeads, kHeadDim}, DType::bf16, gpu);
    const Tensor o = Tensor::empty({1, n, kHeads, kHeadDim}, DType::bf16, gpu);
    const Tensor k_cache = Tensor::empty({1, kMaxSeq, kKvHeads, kHeadDim}, DType::bf16, gpu);
    const Tensor v_cache = Tensor::empty({1, kMaxSeq, kKvHeads, kHeadDim}, DType::bf16, gpu);
    const Tensor append_length = Tensor::empty({1}, DType::i32, gpu);
    const Tensor attention_length = Tensor::empty({1}, DType::i32, gpu);
    const Tensor gate = Tensor::empty({n, kFfn}, DType::f32, gpu);
    const Tensor up = Tensor::empty({n, kFfn}, DType::f32, gpu);
    const Tensor table = Tensor::empty({kVocab, kDim}, DType::f32, gpu);
    const Tensor ids = Tensor::empty({n}, DType::i32, gpu);
    const Tensor flag = Tensor::empty({3}, DType::i64, gpu);
    const Tensor logits = Tensor::empty({1, kVocab}, DType::f32, gpu);
    const Tensor sampled = Tensor::empty({1}, DType::i32, gpu);
    for (const Tensor* t : {&x, &norm_w, &w, &qkv, &inv_freq, &k_cache, &v_cache, &gate, &up, &table, &logits})
      CHECK(cudaMemsetAsync(t->data(), 0, t->nbytes(), raw));
    CHECK(cudaMemsetAsync(ids.data(), 0, ids.nbytes(), raw));
    const std::int32_t length = static_cast<std::int32_t>(n);
    CHECK(cudaMemcpyAsync(attention_length.data(), &length, sizeof(length), cudaMemcpyHostToDevice, raw));
    CHECK(cudaMemsetAsync(append_length.data(), 0, sizeof(std::int32_t), raw));
    embedding_clear_flag(flag, stream);

    time_op("empty kernel (<<<1, 32>>>)", n, calls, raw, [&] { empty_kernel<<<1, 32, 0, raw>>>(); });
    time_op("cudaMemsetAsync 4 bytes", n, calls, raw, [&] { CHECK(cudaMemsetAsync(sampled.data(), 0, 4, raw)); });
    time_op("embedding_forward_deferred", n, calls, raw,
            [&] { embedding_forward_deferred(table, ids, x, flag, stream); });
    time_op("rmsnorm_forward f32", n, calls, raw, [&] { rmsnorm_forward(x, norm_w, xn, 1e-5f, stream); });
    time_op("cast f32 -> bf16", n, calls, raw, [&] { cast(xn, xb, stream); });
    time_op("CublasLt::linear bf16 576x576", n, calls, raw,
            [&] { lt.linear(w, xb.data(), y.data_as<float>(), n, 0.0f, stream); });
    RopeAppendArgs rope;
    rope.rotary_dim = kHeadDim;
    time_op("rope_qkv_append bf16 cache", n, calls, raw, [&] {
      std::int64_t host_length = 0;  // the device length runs past the cache; those rows are dropped
      rope_qkv_append(qkv, inv_freq, rope, q.reshape({n, kHeads, kHeadDim}), k_cache, v_cache, append_length,
                      std::span<std::int64_t>(&host_length, 1), stream);
    });
    AttentionParams causal;
    causal.causal = true;
    time_op("flash_attention_kvcache_forward", n, calls, raw, [&] {
      flash_attention_kvcache_forward(q, k_cache, v_cache, attention_length, o, Tensor(), causal, stream);
    });
    time_op("swiglu_forward f32", n, calls, raw, [&] { swiglu_forward(gate, up, gate, stream); });
    SamplingParams greedy;
    greedy.temperature = 0.0;
    time_op("sample greedy 1 x 49152 f32", n, calls, raw, [&] { sample(logits, greedy, sampled, stream); });
  }
  CHECK(cudaStreamDestroy(raw));
  return 0;
}
