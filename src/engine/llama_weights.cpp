#include "engine/llama_weights.h"

#include <string>

#include "ignis/error.h"
#include "model/gguf_llama_permute.h"

namespace ignis::engine {
namespace {

constexpr const char* kWhere = "llama weights";

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The tensor `name` decoded to f32 after checking its row-major shape.
std::vector<float> read(const model::GgufFile& file, const std::string& name, const std::vector<std::int64_t>& shape) {
  const model::GgufTensor* t = file.find_tensor(name);
  check_arg(t != nullptr, kWhere, name, "a tensor of shape " + shape_text(shape), "none");
  check_arg(t->shape == shape, kWhere, name + ".shape", shape_text(shape), shape_text(t->shape));
  return model::dequantize(*t);
}

LinearWeight read_linear(const model::GgufFile& file, const std::string& name, std::int64_t rows, std::int64_t cols,
                         WeightFormat format) {
  return LinearWeight(read(file, name, {rows, cols}), rows, cols, format);
}

LinearWeight read_qk(const model::GgufFile& file, const std::string& name, std::int64_t heads,
                     const LlamaConfig& c, const WeightOptions& options) {
  std::vector<float> w = read(file, name, {heads * c.head_dim, c.dim});
  if (options.qk_order == QkOrder::hf_rotate_half) {
    check_arg(c.rotary_dim == c.head_dim, kWhere, "qk_order hf_rotate_half", "rotary_dim == head_dim",
              std::to_string(c.rotary_dim) + " != " + std::to_string(c.head_dim));
    w = model::unpermute_qk_rows(w, heads, c.head_dim);
  }
  return LinearWeight(w, heads * c.head_dim, c.dim, options.format);
}

}  // namespace

RopeStyle rope_style(QkOrder order) {
  return order == QkOrder::gguf_interleaved ? RopeStyle::interleaved : RopeStyle::rotate_half;
}

std::size_t LlamaWeights::bytes() const {
  std::size_t n = token_embd.bytes() + output_norm.size() * sizeof(float) + (output ? output->bytes() : 0);
  for (const LlamaLayerWeights& l : layers) {
    n += (l.attn_norm.size() + l.ffn_norm.size()) * sizeof(float);
    for (const LinearWeight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) n += w->bytes();
  }
  return n;
}

LlamaWeights LlamaWeights::load(const model::GgufFile& file, const LlamaConfig& c, const WeightOptions& options) {
  LlamaWeights w;
  w.qk_order = options.qk_order;
  w.token_embd = read_linear(file, "token_embd.weight", c.vocab_size, c.dim, options.format);
  w.output_norm = read(file, "output_norm.weight", {c.dim});
  if (file.find_tensor("output.weight") != nullptr)
    w.output = read_linear(file, "output.weight", c.vocab_size, c.dim, options.format);
  if (file.find_tensor("rope_freqs.weight") != nullptr)
    w.rope_freq_factors = read(file, "rope_freqs.weight", {c.rotary_dim / 2});
  w.layers.resize(static_cast<std::size_t>(c.n_layers));
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LlamaLayerWeights& l = w.layers[static_cast<std::size_t>(i)];
    l.attn_norm = read(file, p + "attn_norm.weight", {c.dim});
    l.ffn_norm = read(file, p + "ffn_norm.weight", {c.dim});
    l.wq = read_qk(file, p + "attn_q.weight", c.n_heads, c, options);
    l.wk = read_qk(file, p + "attn_k.weight", c.n_kv_heads, c, options);
    l.wv = read_linear(file, p + "attn_v.weight", c.kv_dim(), c.dim, options.format);
    l.wo = read_linear(file, p + "attn_output.weight", c.dim, c.q_dim(), options.format);
    l.w_gate = read_linear(file, p + "ffn_gate.weight", c.ffn_dim, c.dim, options.format);
    l.w_up = read_linear(file, p + "ffn_up.weight", c.ffn_dim, c.dim, options.format);
    l.w_down = read_linear(file, p + "ffn_down.weight", c.dim, c.ffn_dim, options.format);
  }
  return w;
}

}  // namespace ignis::engine
