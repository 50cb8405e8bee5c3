#pragma once
// A tiny random Llama for the engine tests: weights drawn in Hugging Face layout, written to a
// GGUF file the way llama.cpp's converter writes one (q/k rows permuted for interleaved RoPE),
// and an independent fp64 forward pass with plain loops in HF conventions (rotate-half RoPE,
// no cache: every position recomputed from scratch).
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ignis/float16.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

namespace ignis::test {

struct TinyLlamaSpec {
  std::int64_t layers = 2, dim = 24, ffn = 40, heads = 4, kv_heads = 2, head_dim = 6, vocab = 37, context = 64;
  double theta = 10000.0;
  double eps = 1e-5;
  bool tied = true;        // no output.weight: the lm head is token_embd
  std::uint64_t seed = 1;
};

struct TinyLayer {
  std::vector<double> attn_norm, ffn_norm;              // [dim]
  std::vector<double> wq, wk, wv, wo, gate, up, down;   // [out, in], HF row order
};

struct TinyLlama {
  TinyLlamaSpec spec;
  std::vector<double> embd;    // [vocab, dim]
  std::vector<double> output;  // [vocab, dim] when !tied
  std::vector<double> output_norm;
  std::vector<TinyLayer> layers;
};

// Values exactly representable in f32 so the file holds the reference's weights exactly.
inline std::vector<double> random_values(std::mt19937_64& rng, std::size_t n, double scale, double offset = 0.0) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<double>(static_cast<float>(offset + scale * u(rng)));
  return v;
}

inline TinyLlama make_tiny_llama(const TinyLlamaSpec& s) {
  std::mt19937_64 rng(s.seed);
  TinyLlama m;
  m.spec = s;
  const auto n = [](std::int64_t a, std::int64_t b) { return static_cast<std::size_t>(a * b); };
  const double in_scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  m.embd = random_values(rng, n(s.vocab, s.dim), 1.0);
  if (!s.tied) m.output = random_values(rng, n(s.vocab, s.dim), in_scale * 2.0);
  m.output_norm = random_values(rng, n(1, s.dim), 0.3, 1.0);
  for (std::int64_t l = 0; l < s.layers; ++l) {
    TinyLayer t;
    t.attn_norm = random_values(rng, n(1, s.dim), 0.3, 1.0);
    t.ffn_norm = random_values(rng, n(1, s.dim), 0.3, 1.0);
    // Large enough q/k that attention is far from uniform: position errors would show.
    t.wq = random_values(rng, n(s.heads * s.head_dim, s.dim), 3.0 * in_scale);
    t.wk = random_values(rng, n(s.kv_heads * s.head_dim, s.dim), 3.0 * in_scale);
    t.wv = random_values(rng, n(s.kv_heads * s.head_dim, s.dim), in_scale);
    t.wo =
        random_values(rng, n(s.dim, s.heads * s.head_dim), 1.0 / std::sqrt(static_cast<double>(s.heads * s.head_dim)));
    t.gate = random_values(rng, n(s.ffn, s.dim), in_scale);
    t.up = random_values(rng, n(s.ffn, s.dim), in_scale);
    t.down = random_values(rng, n(s.dim, s.ffn), 1.0 / std::sqrt(static_cast<double>(s.ffn)));
    m.layers.push_back(std::move(t));
  }
  return m;
}

// The same model with every matrix the engine stores as bf16 rounded to bf16 (norms stay f32).
inline TinyLlama rounded_to_bf16(TinyLlama m) {
  const auto round = [](std::vector<double>& v) {
    for (double& x : v) x = bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x)));
  };
  round(m.embd);
  round(m.output);
  for (TinyLayer& l : m.layers)
    for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) round(*w);
  return m;
}

// HF row order -> GGUF row order of one q/k matrix, written out independently of the library:
// HF row half * (head_dim / 2) + i of a head is stored at GGUF row 2i + half.
inline std::vector<double> to_gguf_rows(const std::vector<double>& w, std::int64_t heads, std::int64_t head_dim,
                                        std::int64_t cols) {
  std::vector<double> out(w.size());
  const std::int64_t half_dim = head_dim / 2;
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t half = 0; half < 2; ++half)
      for (std::int64_t i = 0; i < half_dim; ++i) {
        const std::int64_t src = h * head_dim + half * half_dim + i, dst = h * head_dim + 2 * i + half;
        for (std::int64_t c = 0; c < cols; ++c)
          out[static_cast<std::size_t>(dst * cols + c)] = w[static_cast<std::size_t>(src * cols + c)];
      }
  return out;
}

inline Bytes f32_bytes(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return raw_values(f);
}

// Writes the model's metadata; `extra` may add or override keys before the tensors.
inline GgufWriter tiny_llama_writer(const TinyLlama& m) {
  const TinyLlamaSpec& s = m.spec;
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_scalar<std::uint32_t>("llama.block_count", static_cast<std::uint32_t>(s.layers));
  w.add_scalar<std::uint32_t>("llama.context_length", static_cast<std::uint32_t>(s.context));
  w.add_scalar<std::uint32_t>("llama.embedding_length", static_cast<std::uint32_t>(s.dim));
  w.add_scalar<std::uint32_t>("llama.feed_forward_length", static_cast<std::uint32_t>(s.ffn));
  w.add_scalar<std::uint32_t>("llama.attention.head_count", static_cast<std::uint32_t>(s.heads));
  w.add_scalar<std::uint32_t>("llama.attention.head_count_kv", static_cast<std::uint32_t>(s.kv_heads));
  w.add_scalar<std::uint32_t>("llama.attention.key_length", static_cast<std::uint32_t>(s.head_dim));
  w.add_scalar<std::uint32_t>("llama.attention.value_length", static_cast<std::uint32_t>(s.head_dim));
  w.add_scalar<std::uint32_t>("llama.rope.dimension_count", static_cast<std::uint32_t>(s.head_dim));
  w.add_scalar<float>("llama.rope.freq_base", static_cast<float>(s.theta));
  w.add_scalar<float>("llama.attention.layer_norm_rms_epsilon", static_cast<float>(s.eps));
  w.add_scalar<std::uint32_t>("llama.vocab_size", static_cast<std::uint32_t>(s.vocab));
  return w;
}

inline void add_tiny_llama_tensors(GgufWriter& w, const TinyLlama& m) {
  const TinyLlamaSpec& s = m.spec;
  using model::GgmlType;
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  w.add_tensor("token_embd.weight", GgmlType::F32, {u(s.dim), u(s.vocab)}, f32_bytes(m.embd));
  w.add_tensor("output_norm.weight", GgmlType::F32, {u(s.dim)}, f32_bytes(m.output_norm));
  if (!s.tied) w.add_tensor("output.weight", GgmlType::F32, {u(s.dim), u(s.vocab)}, f32_bytes(m.output));
  for (std::int64_t l = 0; l < s.layers; ++l) {
    const TinyLayer& t = m.layers[static_cast<std::size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    w.add_tensor(p + "attn_norm.weight", GgmlType::F32, {u(s.dim)}, f32_bytes(t.attn_norm));
    w.add_tensor(p + "ffn_norm.weight", GgmlType::F32, {u(s.dim)}, f32_bytes(t.ffn_norm));
    w.add_tensor(p + "attn_q.weight", GgmlType::F32, {u(s.dim), u(s.heads * s.head_dim)},
                 f32_bytes(to_gguf_rows(t.wq, s.heads, s.head_dim, s.dim)));
    w.add_tensor(p + "attn_k.weight", GgmlType::F32, {u(s.dim), u(s.kv_heads * s.head_dim)},
                 f32_bytes(to_gguf_rows(t.wk, s.kv_heads, s.head_dim, s.dim)));
    w.add_tensor(p + "attn_v.weight", GgmlType::F32, {u(s.dim), u(s.kv_heads * s.head_dim)}, f32_bytes(t.wv));
    w.add_tensor(p + "attn_output.weight", GgmlType::F32, {u(s.heads * s.head_dim), u(s.dim)}, f32_bytes(t.wo));
    w.add_tensor(p + "ffn_gate.weight", GgmlType::F32, {u(s.dim), u(s.ffn)}, f32_bytes(t.gate));
    w.add_tensor(p + "ffn_up.weight", GgmlType::F32, {u(s.dim), u(s.ffn)}, f32_bytes(t.up));
    w.add_tensor(p + "ffn_down.weight", GgmlType::F32, {u(s.ffn), u(s.dim)}, f32_bytes(t.down));
  }
}

inline Bytes tiny_llama_gguf(const TinyLlama& m) {
  GgufWriter w = tiny_llama_writer(m);
  add_tiny_llama_tensors(w, m);
  return w.build();
}

// File bytes and the GgufFile that views them, kept together.
struct ParsedGguf {
  explicit ParsedGguf(Bytes b) : bytes(std::move(b)), file(model::GgufFile::parse(bytes)) {}
  ParsedGguf(const ParsedGguf&) = delete;
  ParsedGguf& operator=(const ParsedGguf&) = delete;
  Bytes bytes;
  model::GgufFile file;
};

// ---- fp64 reference ----------------------------------------------------------------------

// y[r] = sum_c w[r, c] x[c]; w: [rows, x.size()].
inline std::vector<double> ref_matvec(const std::vector<double>& w, const std::vector<double>& x) {
  const std::size_t cols = x.size(), rows = w.size() / cols;
  std::vector<double> y(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
  return y;
}

inline std::vector<double> ref_rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

// Rotate-half RoPE of every head of `v` (heads * head_dim) at position `pos`.
inline void ref_rope(std::vector<double>& v, std::int64_t head_dim, std::int64_t pos, double theta) {
  const std::int64_t half = head_dim / 2;
  for (std::size_t base = 0; base < v.size(); base += static_cast<std::size_t>(head_dim))
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(pos) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double a = v[base + static_cast<std::size_t>(i)], b = v[base + static_cast<std::size_t>(i + half)];
      v[base + static_cast<std::size_t>(i)] = a * std::cos(angle) - b * std::sin(angle);
      v[base + static_cast<std::size_t>(i + half)] = b * std::cos(angle) + a * std::sin(angle);
    }
}

// Logits [tokens.size()][vocab] of every position, tokens at positions 0, 1, ...
inline std::vector<std::vector<double>> ref_forward(const TinyLlama& m, const std::vector<std::int32_t>& tokens) {
  const TinyLlamaSpec& s = m.spec;
  const std::size_t n = tokens.size(), D = static_cast<std::size_t>(s.dim), hd = static_cast<std::size_t>(s.head_dim);
  std::vector<std::vector<double>> x(n);
  for (std::size_t t = 0; t < n; ++t)
    x[t].assign(m.embd.begin() + static_cast<std::ptrdiff_t>(tokens[t] * s.dim),
                m.embd.begin() + static_cast<std::ptrdiff_t>((tokens[t] + 1) * s.dim));
  for (const TinyLayer& L : m.layers) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (std::size_t t = 0; t < n; ++t) {
      const auto xn = ref_rmsnorm(x[t], L.attn_norm, s.eps);
      q[t] = ref_matvec(L.wq, xn);
      k[t] = ref_matvec(L.wk, xn);
      v[t] = ref_matvec(L.wv, xn);
      ref_rope(q[t], s.head_dim, static_cast<std::int64_t>(t), s.theta);
      ref_rope(k[t], s.head_dim, static_cast<std::int64_t>(t), s.theta);
    }
    const std::size_t group = static_cast<std::size_t>(s.heads / s.kv_heads);
    for (std::size_t t = 0; t < n; ++t) {
      std::vector<double> attn(static_cast<std::size_t>(s.heads) * hd, 0.0);
      for (std::size_t h = 0; h < static_cast<std::size_t>(s.heads); ++h) {
        const std::size_t kvh = h / group;
        std::vector<double> score(t + 1);
        double mx = -1e300;
        for (std::size_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (std::size_t d = 0; d < hd; ++d) dot += q[t][h * hd + d] * k[j][kvh * hd + d];
          score[j] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, score[j]);
        }
        double sum = 0.0;
        for (double& sc : score) sum += (sc = std::exp(sc - mx));
        for (std::size_t j = 0; j <= t; ++j)
          for (std::size_t d = 0; d < hd; ++d) attn[h * hd + d] += score[j] / sum * v[j][kvh * hd + d];
      }
      const auto o = ref_matvec(L.wo, attn);
      for (std::size_t d = 0; d < D; ++d) x[t][d] += o[d];
    }
    for (std::size_t t = 0; t < n; ++t) {
      const auto xn = ref_rmsnorm(x[t], L.ffn_norm, s.eps);
      const auto g = ref_matvec(L.gate, xn), u = ref_matvec(L.up, xn);
      std::vector<double> a(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const auto d = ref_matvec(L.down, a);
      for (std::size_t i = 0; i < D; ++i) x[t][i] += d[i];
    }
  }
  std::vector<std::vector<double>> logits(n);
  for (std::size_t t = 0; t < n; ++t)
    logits[t] = ref_matvec(s.tied ? m.embd : m.output, ref_rmsnorm(x[t], m.output_norm, s.eps));
  return logits;
}

}  // namespace ignis::test
