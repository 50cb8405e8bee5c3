#include "engine/gpt2_weights.h"

#include <string>

#include "ignis/error.h"
#include "ignis/tensor.h"

namespace ignis::engine {
namespace {

constexpr const char* kWhere = "gpt2 weights";

class Reader {
 public:
  Reader(const model::SafetensorsFile& file, WeightFormat format) : file_(file), format_(format) {
    // Checkpoints of the bare GPT2Model prefix nothing; some of GPT2LMHeadModel prefix "transformer.".
    if (file.find_tensor("wte.weight") == nullptr && file.find_tensor("transformer.wte.weight") != nullptr)
      prefix_ = "transformer.";
  }

  // The tensor `name` as f32 after checking its row-major shape.
  std::vector<float> read(const std::string& name, const Shape& shape, bool prefixed = true) const {
    const std::string full = prefixed ? prefix_ + name : name;
    const model::SafetensorsTensor* t = file_.find_tensor(full);
    check_arg(t != nullptr, kWhere, full, "a tensor of shape " + shape_str(shape), "none");
    check_arg(t->shape == shape, kWhere, full + ".shape", shape_str(shape), shape_str(t->shape));
    return model::to_f32(*t);  // names the tensor when its dtype cannot be converted
  }

  LinearWeight linear(const std::vector<float>& rows_major, std::int64_t rows, std::int64_t cols) const {
    return LinearWeight(rows_major, rows, cols, format_);
  }

 private:
  const model::SafetensorsFile& file_;
  WeightFormat format_;
  std::string prefix_;
};

// Columns [col0, col0 + out) of a Conv1D weight w: [in, w_cols] as the [out, in] matrix of a
// LinearWeight.
std::vector<float> conv1d_to_rows(const std::vector<float>& w, std::int64_t in, std::int64_t w_cols, std::int64_t col0,
                                  std::int64_t out) {
  std::vector<float> rows(static_cast<std::size_t>(out * in));
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t i = 0; i < in; ++i)
      rows[static_cast<std::size_t>(o * in + i)] = w[static_cast<std::size_t>(i * w_cols + col0 + o)];
  return rows;
}

std::vector<float> slice(const std::vector<float>& v, std::int64_t begin, std::int64_t n) {
  return std::vector<float>(v.begin() + begin, v.begin() + begin + n);
}

}  // namespace

std::size_t Gpt2Weights::bytes() const {
  auto floats = [](const std::vector<float>& v) { return v.size() * sizeof(float); };
  std::size_t n = wte.bytes() + floats(wpe) + floats(ln_f_weight) + floats(ln_f_bias) +
                  (lm_head_weight ? lm_head_weight->bytes() : 0);
  for (const Gpt2LayerWeights& l : layers) {
    for (const auto* v : {&l.ln1_weight, &l.ln1_bias, &l.bq, &l.bk, &l.bv, &l.attn_proj_bias, &l.ln2_weight,
                          &l.ln2_bias, &l.fc_bias, &l.mlp_proj_bias})
      n += floats(*v);
    for (const LinearWeight* w : {&l.wq, &l.wk, &l.wv, &l.attn_proj, &l.fc, &l.mlp_proj}) n += w->bytes();
  }
  return n;
}

Gpt2Weights Gpt2Weights::load(const model::SafetensorsFile& file, const Gpt2Config& c, WeightFormat format) {
  c.validate();
  const Reader r(file, format);
  const std::int64_t d = c.dim, f = c.ffn_dim;
  Gpt2Weights w;
  w.wte = r.linear(r.read("wte.weight", {c.vocab_size, d}), c.vocab_size, d);
  w.wpe = r.read("wpe.weight", {c.n_positions, d});
  w.ln_f_weight = r.read("ln_f.weight", {d});
  w.ln_f_bias = r.read("ln_f.bias", {d});
  // An lm head stored beside the body is never prefixed.
  if (file.find_tensor("lm_head.weight") != nullptr)
    w.lm_head_weight = r.linear(r.read("lm_head.weight", {c.vocab_size, d}, /*prefixed=*/false), c.vocab_size, d);
  w.layers.resize(static_cast<std::size_t>(c.n_layers));
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    Gpt2LayerWeights& l = w.layers[static_cast<std::size_t>(i)];
    l.ln1_weight = r.read(p + "ln_1.weight", {d});
    l.ln1_bias = r.read(p + "ln_1.bias", {d});
    const std::vector<float> qkv = r.read(p + "attn.c_attn.weight", {d, 3 * d});
    const std::vector<float> qkv_bias = r.read(p + "attn.c_attn.bias", {3 * d});
    l.wq = r.linear(conv1d_to_rows(qkv, d, 3 * d, 0, d), d, d);
    l.wk = r.linear(conv1d_to_rows(qkv, d, 3 * d, d, d), d, d);
    l.wv = r.linear(conv1d_to_rows(qkv, d, 3 * d, 2 * d, d), d, d);
    l.bq = slice(qkv_bias, 0, d);
    l.bk = slice(qkv_bias, d, d);
    l.bv = slice(qkv_bias, 2 * d, d);
    l.attn_proj = r.linear(conv1d_to_rows(r.read(p + "attn.c_proj.weight", {d, d}), d, d, 0, d), d, d);
    l.attn_proj_bias = r.read(p + "attn.c_proj.bias", {d});
    l.ln2_weight = r.read(p + "ln_2.weight", {d});
    l.ln2_bias = r.read(p + "ln_2.bias", {d});
    l.fc = r.linear(conv1d_to_rows(r.read(p + "mlp.c_fc.weight", {d, f}), d, f, 0, f), f, d);
    l.fc_bias = r.read(p + "mlp.c_fc.bias", {f});
    l.mlp_proj = r.linear(conv1d_to_rows(r.read(p + "mlp.c_proj.weight", {f, d}), f, d, 0, d), d, f);
    l.mlp_proj_bias = r.read(p + "mlp.c_proj.bias", {d});
  }
  return w;
}

}  // namespace ignis::engine
