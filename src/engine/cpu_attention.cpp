#include "engine/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ignis/error.h"

namespace ignis::engine {
namespace {

// Keys scored per block: the scores stay in L1 and the output row is rescaled once per block.
constexpr std::int64_t kKeyBlock = 64;

struct Geometry {
  std::int64_t batch, n_new, heads_q, heads_kv, head_dim, max_seq;
};

// out = softmax(scale * q . K[0..visible)) @ V[0..visible) for one query row.
// k, v: the head's first cache row, rows `stride` floats apart.
void attend_row(const float* q, const float* k, const float* v, std::int64_t stride, std::int64_t visible,
                std::int64_t head_dim, float scale, float* out, std::vector<float>& scores) {
  float running_max = -std::numeric_limits<float>::infinity();
  float running_sum = 0.0f;
  std::fill(out, out + head_dim, 0.0f);
  for (std::int64_t start = 0; start < visible; start += kKeyBlock) {
    const std::int64_t n = std::min(kKeyBlock, visible - start);
    float block_max = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < n; ++j) {
      const float* kr = k + (start + j) * stride;
      float dot = 0.0f;
      for (std::int64_t d = 0; d < head_dim; ++d) dot += q[d] * kr[d];
      scores[static_cast<std::size_t>(j)] = dot * scale;
      block_max = std::max(block_max, dot * scale);
    }
    const float new_max = std::max(running_max, block_max);
    const float correction = std::exp(running_max - new_max);  // exp(-inf) = 0 on the first block
    running_sum *= correction;
    for (std::int64_t d = 0; d < head_dim; ++d) out[d] *= correction;
    for (std::int64_t j = 0; j < n; ++j) {
      const float p = std::exp(scores[static_cast<std::size_t>(j)] - new_max);
      running_sum += p;
      const float* vr = v + (start + j) * stride;
      for (std::int64_t d = 0; d < head_dim; ++d) out[d] += p * vr[d];
    }
    running_max = new_max;
  }
  const float inv = running_sum > 0.0f ? 1.0f / running_sum : 0.0f;
  for (std::int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

class CpuAttention final : public AttentionBackend {
 public:
  explicit CpuAttention(ThreadPool& pool) : pool_(pool) {}
  const char* name() const override { return "cpu"; }

  void prefill(const AttentionBatch& batch, Stream) override { run(batch, "cpu attention prefill"); }

  void decode(const AttentionBatch& batch, Stream) override {
    check_arg(batch.q.dim() == 4 && batch.q.size(1) == 1, "cpu attention decode", "q.shape[1]", 1,
              batch.q.dim() == 4 ? batch.q.size(1) : -1);
    run(batch, "cpu attention decode");
  }

 private:
  void run(const AttentionBatch& a, const char* where) {
    check_attention_batch(a, where);
    check_arg(a.q.device().is_cpu(), where, "q.device", "cpu", a.q.device().str());
    check_dtype(a.q, DType::f32, where, "q");
    const Geometry g{a.q.size(0), a.q.size(1), a.q.size(2), a.k_cache.size(2), a.q.size(3), a.k_cache.size(1)};
    const std::int64_t group = g.heads_q / g.heads_kv;
    const std::int64_t stride = g.heads_kv * g.head_dim;
    const float* q = a.q.data_as<const float>();
    const float* kc = a.k_cache.data_as<const float>();
    const float* vc = a.v_cache.data_as<const float>();
    float* out = a.out.data_as<float>();
    // One chunk per (sequence, query, head), claimed dynamically: later queries see more keys,
    // so equal static ranges would leave one thread the long rows.
    const std::int64_t tasks = g.batch * g.n_new * g.heads_q;
    pool_.run_chunks(tasks, [&](std::int64_t t) {
      thread_local std::vector<float> scores;
      scores.resize(kKeyBlock);
      const std::int64_t h = t % g.heads_q;
      const std::int64_t i = t / g.heads_q % g.n_new;
      const std::int64_t b = t / (g.heads_q * g.n_new);
      const std::int64_t visible = a.kv_lengths[static_cast<std::size_t>(b)] - g.n_new + i + 1;
      const std::int64_t seq_base = b * g.max_seq * stride + h / group * g.head_dim;
      const std::int64_t row = ((b * g.n_new + i) * g.heads_q + h) * g.head_dim;
      attend_row(q + row, kc + seq_base, vc + seq_base, stride, visible, g.head_dim, a.scale, out + row, scores);
    });
  }

  ThreadPool& pool_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cpu_attention(ThreadPool& pool) { return std::make_unique<CpuAttention>(pool); }

}  // namespace ignis::engine
