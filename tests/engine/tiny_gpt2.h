#pragma once
// A tiny random GPT-2 for the engine tests: weights drawn in the Hugging Face layout (Conv1D
// weights [in, out], q | k | v along c_attn's out axis), written as a model folder
// (config.json, model.safetensors, tokenizer.json) and an independent fp64 forward pass with
// plain loops that reads that layout directly and recomputes every position from scratch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/tiny_llama.h"
#include "model/safetensors_writer.h"
#include "model/tokenizer_fixtures.h"

namespace ignis::test {

struct TinyGpt2Spec {
  // vocab: the tiny tokenizer's, so its ids are the model's.
  std::int64_t layers = 2, dim = 16, heads = 4, ffn = 40, positions = 24, vocab = kTinyVocab;
  double eps = 1e-5;
  std::string prefix;    // "transformer." as GPT2LMHeadModel checkpoints write it, or none
  bool lm_head = false;  // an lm_head.weight of its own instead of the tied wte
  std::uint64_t seed = 1;
};

struct TinyGpt2Layer {
  std::vector<double> ln1_w, ln1_b, ln2_w, ln2_b;  // [dim]
  std::vector<double> attn_w, attn_b;              // [dim, 3 * dim], [3 * dim]
  std::vector<double> attn_proj_w, attn_proj_b;    // [dim, dim], [dim]
  std::vector<double> fc_w, fc_b;                  // [dim, ffn], [ffn]
  std::vector<double> mlp_proj_w, mlp_proj_b;      // [ffn, dim], [dim]
};

struct TinyGpt2 {
  TinyGpt2Spec spec;
  std::vector<double> wte, wpe, lm_head;  // [vocab, dim], [positions, dim], [vocab, dim] when spec.lm_head
  std::vector<double> lnf_w, lnf_b;
  std::vector<TinyGpt2Layer> layers;
};

inline TinyGpt2 make_tiny_gpt2(const TinyGpt2Spec& s) {
  std::mt19937_64 rng(s.seed);
  const auto n = [](std::int64_t a, std::int64_t b = 1) { return static_cast<std::size_t>(a * b); };
  const double in_scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  TinyGpt2 m;
  m.spec = s;
  m.wte = random_values(rng, n(s.vocab, s.dim), 1.0);
  m.wpe = random_values(rng, n(s.positions, s.dim), 0.5);
  if (s.lm_head) m.lm_head = random_values(rng, n(s.vocab, s.dim), 1.0);
  m.lnf_w = random_values(rng, n(s.dim), 0.3, 1.0);
  m.lnf_b = random_values(rng, n(s.dim), 0.2);
  for (std::int64_t l = 0; l < s.layers; ++l) {
    TinyGpt2Layer t;
    t.ln1_w = random_values(rng, n(s.dim), 0.3, 1.0);
    t.ln1_b = random_values(rng, n(s.dim), 0.2);
    // Large enough q/k that attention is far from uniform: position errors would show.
    t.attn_w = random_values(rng, n(s.dim, 3 * s.dim), 3.0 * in_scale);
    t.attn_b = random_values(rng, n(3 * s.dim), 0.3);
    t.attn_proj_w = random_values(rng, n(s.dim, s.dim), in_scale);
    t.attn_proj_b = random_values(rng, n(s.dim), 0.2);
    t.ln2_w = random_values(rng, n(s.dim), 0.3, 1.0);
    t.ln2_b = random_values(rng, n(s.dim), 0.2);
    t.fc_w = random_values(rng, n(s.dim, s.ffn), 2.0 * in_scale);
    t.fc_b = random_values(rng, n(s.ffn), 0.3);
    t.mlp_proj_w = random_values(rng, n(s.ffn, s.dim), 1.0 / std::sqrt(static_cast<double>(s.ffn)));
    t.mlp_proj_b = random_values(rng, n(s.dim), 0.2);
    m.layers.push_back(std::move(t));
  }
  return m;
}

inline nlohmann::json tiny_gpt2_config(const TinyGpt2Spec& s) {
  // As transformers writes it, with keys the engine ignores.
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"activation_function", "gelu_new"},
          {"n_layer", s.layers},
          {"n_head", s.heads},
          {"n_embd", s.dim},
          {"n_inner", s.ffn},
          {"n_positions", s.positions},
          {"n_ctx", s.positions},
          {"vocab_size", s.vocab},
          {"layer_norm_epsilon", s.eps},
          {"resid_pdrop", 0.1},
          {"scale_attn_weights", true},
          {"reorder_and_upcast_attn", false},
          {"bos_token_id", kEndOfText},
          {"eos_token_id", kEndOfText},
          {"torch_dtype", "float32"}};
}

// The tensors of the checkpoint as F32; `skip` leaves one out.
inline SafetensorsWriter tiny_gpt2_writer(const TinyGpt2& m, const std::string& skip = "") {
  const TinyGpt2Spec& s = m.spec;
  SafetensorsWriter w;
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const auto add = [&](const std::string& name, std::vector<std::uint64_t> shape, const std::vector<double>& v,
                       bool prefixed = true) {
    const std::string full = (prefixed ? s.prefix : "") + name;
    if (full != skip) w.add(full, "F32", std::move(shape), f32_bytes(v));
  };
  add("wte.weight", {u(s.vocab), u(s.dim)}, m.wte);
  add("wpe.weight", {u(s.positions), u(s.dim)}, m.wpe);
  for (std::int64_t l = 0; l < s.layers; ++l) {
    const TinyGpt2Layer& t = m.layers[static_cast<std::size_t>(l)];
    const std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {u(s.dim)}, t.ln1_w);
    add(p + "ln_1.bias", {u(s.dim)}, t.ln1_b);
    add(p + "attn.c_attn.weight", {u(s.dim), u(3 * s.dim)}, t.attn_w);
    add(p + "attn.c_attn.bias", {u(3 * s.dim)}, t.attn_b);
    add(p + "attn.c_proj.weight", {u(s.dim), u(s.dim)}, t.attn_proj_w);
    add(p + "attn.c_proj.bias", {u(s.dim)}, t.attn_proj_b);
    add(p + "ln_2.weight", {u(s.dim)}, t.ln2_w);
    add(p + "ln_2.bias", {u(s.dim)}, t.ln2_b);
    add(p + "mlp.c_fc.weight", {u(s.dim), u(s.ffn)}, t.fc_w);
    add(p + "mlp.c_fc.bias", {u(s.ffn)}, t.fc_b);
    add(p + "mlp.c_proj.weight", {u(s.ffn), u(s.dim)}, t.mlp_proj_w);
    add(p + "mlp.c_proj.bias", {u(s.dim)}, t.mlp_proj_b);
  }
  add("ln_f.weight", {u(s.dim)}, m.lnf_w);
  add("ln_f.bias", {u(s.dim)}, m.lnf_b);
  if (s.lm_head) add("lm_head.weight", {u(s.vocab), u(s.dim)}, m.lm_head, /*prefixed=*/false);
  return w;
}

// The tiny byte-level vocabulary of tokenizer_fixtures.h as a GPT-2 tokenizer.json (plain
// ByteLevel pre-tokenizer).
inline nlohmann::json tiny_gpt2_tokenizer_json() {
  const model::TokenizerSpec spec = tiny_spec();
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array(), merges = nlohmann::json::array();
  for (std::size_t i = 0; i < spec.tokens.size(); ++i) {
    if (spec.types[i] == model::TokenType::Normal)
      vocab[spec.tokens[i]] = i;
    else
      added.push_back(
          {{"id", i}, {"content", spec.tokens[i]}, {"special", spec.types[i] == model::TokenType::Control}});
  }
  for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

// A fresh temporary folder, removed with the object.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("ignis_gpt2_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  void write(const std::string& name, const Bytes& bytes) const {
    std::ofstream out(path_ / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::filesystem::path path_;
};

// A complete model folder.
inline void write_tiny_gpt2(const TempDir& dir, const TinyGpt2& m) {
  dir.write("config.json", tiny_gpt2_config(m.spec).dump(1));
  dir.write("model.safetensors", tiny_gpt2_writer(m).build());
  dir.write("tokenizer.json", tiny_gpt2_tokenizer_json().dump());
}

// ---- fp64 reference ----------------------------------------------------------------------

// y[o] = b[o] + sum_i x[i] w[i, o]: a Conv1D with w: [x.size(), b.size()].
inline std::vector<double> ref_conv1d(const std::vector<double>& x, const std::vector<double>& w,
                                      const std::vector<double>& b) {
  const std::size_t in = x.size(), out = b.size();
  std::vector<double> y = b;
  for (std::size_t i = 0; i < in; ++i)
    for (std::size_t o = 0; o < out; ++o) y[o] += x[i] * w[i * out + o];
  return y;
}

inline std::vector<double> ref_layernorm(const std::vector<double>& x, const std::vector<double>& w,
                                         const std::vector<double>& b, double eps) {
  const double n = static_cast<double>(x.size());
  double mean = 0.0, var = 0.0;
  for (double v : x) mean += v;
  mean /= n;
  for (double v : x) var += (v - mean) * (v - mean);
  const double r = 1.0 / std::sqrt(var / n + eps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * r * w[i] + b[i];
  return y;
}

inline double ref_gelu_new(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// Logits [tokens.size()][vocab] of every position, tokens at positions 0, 1, ...
inline std::vector<std::vector<double>> ref_gpt2_forward(const TinyGpt2& m, const std::vector<std::int32_t>& tokens) {
  const TinyGpt2Spec& s = m.spec;
  const std::size_t n = tokens.size(), D = static_cast<std::size_t>(s.dim);
  const std::size_t H = static_cast<std::size_t>(s.heads), hd = D / H;
  std::vector<std::vector<double>> x(n, std::vector<double>(D));
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t i = 0; i < D; ++i)
      x[t][i] = m.wte[static_cast<std::size_t>(tokens[t]) * D + i] + m.wpe[t * D + i];
  for (const TinyGpt2Layer& L : m.layers) {
    std::vector<std::vector<double>> qkv(n);
    for (std::size_t t = 0; t < n; ++t)
      qkv[t] = ref_conv1d(ref_layernorm(x[t], L.ln1_w, L.ln1_b, s.eps), L.attn_w, L.attn_b);
    for (std::size_t t = 0; t < n; ++t) {
      std::vector<double> attn(D, 0.0);
      for (std::size_t h = 0; h < H; ++h) {
        std::vector<double> score(t + 1);
        double top = -INFINITY;
        for (std::size_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (std::size_t e = 0; e < hd; ++e) dot += qkv[t][h * hd + e] * qkv[j][D + h * hd + e];
          score[j] = dot / std::sqrt(static_cast<double>(hd));
          top = std::max(top, score[j]);
        }
        double sum = 0.0;
        for (double& v : score) sum += (v = std::exp(v - top));
        for (std::size_t j = 0; j <= t; ++j)
          for (std::size_t e = 0; e < hd; ++e) attn[h * hd + e] += score[j] / sum * qkv[j][2 * D + h * hd + e];
      }
      const std::vector<double> proj = ref_conv1d(attn, L.attn_proj_w, L.attn_proj_b);
      for (std::size_t i = 0; i < D; ++i) x[t][i] += proj[i];
    }
    for (std::size_t t = 0; t < n; ++t) {
      std::vector<double> h = ref_conv1d(ref_layernorm(x[t], L.ln2_w, L.ln2_b, s.eps), L.fc_w, L.fc_b);
      for (double& v : h) v = ref_gelu_new(v);
      const std::vector<double> out = ref_conv1d(h, L.mlp_proj_w, L.mlp_proj_b);
      for (std::size_t i = 0; i < D; ++i) x[t][i] += out[i];
    }
  }
  const std::vector<double>& head = s.lm_head ? m.lm_head : m.wte;
  std::vector<std::vector<double>> logits(n, std::vector<double>(static_cast<std::size_t>(s.vocab), 0.0));
  for (std::size_t t = 0; t < n; ++t) {
    const std::vector<double> xn = ref_layernorm(x[t], m.lnf_w, m.lnf_b, s.eps);
    for (std::size_t v = 0; v < logits[t].size(); ++v)
      for (std::size_t i = 0; i < D; ++i) logits[t][v] += head[v * D + i] * xn[i];
  }
  return logits;
}

}  // namespace ignis::test
