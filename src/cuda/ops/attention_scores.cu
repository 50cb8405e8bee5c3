// Attention scores and unfused attention, composed from the strided batched GEMM (whose
// epilogue applies the scale and the causal mask) and the softmax kernel. Batch index
// z = b * heads_q + h addresses q, k, v and o in place through their strides, so no operand
// is transposed or copied; GQA is the GEMM operand's `group`.
#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/scratch.h"
#include "cuda/ops/attention_scores.h"
#include "cuda/ops/gemm.h"
#include "cuda/ops/softmax.h"

namespace ignis::cuda {
namespace {

struct Dims {
  std::int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
};

// q: [batch, seqlen_q, heads_q, head_dim], k: [batch, seqlen_k, heads_kv, head_dim].
Dims dims_of(const Tensor& q, const Tensor& k) {
  return {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
}

// One (batch, head) slice of a [batch, seqlen, heads, head_dim] tensor: a [seqlen, head_dim]
// matrix whose rows are heads * head_dim apart.
GemmOperand token_major(const void* data, std::int64_t seqlen, std::int64_t heads, std::int64_t head_dim,
                        std::int64_t group) {
  return {data, heads * head_dim, seqlen * heads * head_dim, head_dim, group};
}

// One (batch, head) slice of S/P: [batch, heads_q, seqlen_q, seqlen_k], contiguous.
GemmOperand scores_matrix(const void* data, const Dims& d) {
  return {data, d.seqlen_k, d.heads_q * d.seqlen_q * d.seqlen_k, d.seqlen_q * d.seqlen_k, 1};
}

// One [m, k] x [k, n] product per (batch, query head).
GemmProblem per_head(const Dims& d, std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = d.batch * d.heads_q;
  p.inner_count = d.heads_q;
  return p;
}

// q: [batch, seqlen_q, heads_q, head_dim], k: [batch, seqlen_k, heads_kv, head_dim]
// -> s: [batch, heads_q, seqlen_q, seqlen_k].
GemmProblem scores_problem(const Tensor& q, const Tensor& k, void* s, const Dims& d,
                           const AttentionScoresParams& params) {
  GemmProblem p = per_head(d, d.seqlen_q, d.seqlen_k, d.head_dim);
  p.trans_b = true;
  p.a = token_major(q.data(), d.seqlen_q, d.heads_q, d.head_dim, 1);
  p.b = token_major(k.data(), d.seqlen_k, d.heads_kv, d.head_dim, d.heads_q / d.heads_kv);
  p.c = scores_matrix(s, d);
  p.alpha = params.scale;
  if (params.causal) p.mask_diagonal = d.seqlen_k - d.seqlen_q;
  return p;
}

}  // namespace

void attention_scores(const Tensor& q, const Tensor& k, const Tensor& s, const AttentionScoresParams& params,
                      Stream stream) {
  gemm(scores_problem(q, k, s.data(), dims_of(q, k), params), q.dtype(), stream);
}

void attention_unfused_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                               const AttentionScoresParams& params, Stream stream) {
  const Dims d = dims_of(q, k);
  const std::int64_t rows = d.batch * d.heads_q * d.seqlen_q;
  const Scratch scores(static_cast<std::size_t>(rows * d.seqlen_k) * dtype_size(q.dtype()), stream);
  void* const workspace = scores.at<char>(0);

  gemm(scores_problem(q, k, workspace, d, params), q.dtype(), stream);
  // In place: each softmax thread reads an element before it writes it and touches no other
  // thread's elements after the row reduction.
  const Tensor s = Tensor::view(workspace, q.dtype(), q.device(), {rows, d.seqlen_k});
  cuda::softmax_forward(s, s, stream);

  GemmProblem pv = per_head(d, d.seqlen_q, d.head_dim, d.seqlen_k);
  pv.a = scores_matrix(workspace, d);
  pv.b = token_major(v.data(), d.seqlen_k, d.heads_kv, d.head_dim, d.heads_q / d.heads_kv);
  pv.c = token_major(o.data(), d.seqlen_q, d.heads_q, d.head_dim, 1);
  gemm(pv, q.dtype(), stream);
}

}  // namespace ignis::cuda
