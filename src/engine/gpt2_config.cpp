#include "engine/gpt2_config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "ignis/error.h"

namespace ignis::engine {
namespace {

using nlohmann::json;

constexpr const char* kWhere = "gpt2 config";
constexpr std::int64_t kMaxSize = std::int64_t{1} << 31;

// A value as shown in an error: its JSON text, cut short.
std::string shown(const json& j) {
  constexpr std::size_t kMax = 80;
  const std::string s = j.dump();
  return s.size() > kMax ? s.substr(0, kMax) + "..." : s;
}

class Reader {
 public:
  Reader(const json& root, const std::string& source) : root_(root), where_(std::string(kWhere) + ": " + source) {}

  std::int64_t required_int(const char* key) const {
    check_arg(root_.contains(key), where_, key, "an integer", "none");
    return as_int(key);
  }
  // An absent key or a null gives none (HF writes "n_inner": null).
  std::optional<std::int64_t> optional_int(const char* key) const {
    if (!root_.contains(key) || root_[key].is_null()) return std::nullopt;
    return as_int(key);
  }
  double optional_real(const char* key, double fallback) const {
    if (!root_.contains(key)) return fallback;
    check_arg(root_[key].is_number(), where_, key, "a number", shown(root_[key]));
    return root_[key].get<double>();
  }
  bool optional_bool(const char* key, bool fallback) const {
    if (!root_.contains(key)) return fallback;
    check_arg(root_[key].is_boolean(), where_, key, "true or false", shown(root_[key]));
    return root_[key].get<bool>();
  }
  std::string optional_string(const char* key, const std::string& fallback) const {
    if (!root_.contains(key)) return fallback;
    check_arg(root_[key].is_string(), where_, key, "a string", shown(root_[key]));
    return root_[key].get<std::string>();
  }
  const std::string& where() const { return where_; }

 private:
  std::int64_t as_int(const char* key) const {
    const json& v = root_[key];
    check_arg(v.is_number_integer(), where_, key, "an integer", shown(v));
    return v.get<std::int64_t>();
  }

  const json& root_;
  std::string where_;
};

// `where` names the file when there is one.
void check_config(const Gpt2Config& c, const std::string& where) {
  // The bound keeps every product of two sizes within int64.
  auto positive = [&](std::int64_t v, const char* name) {
    check_arg(v > 0 && v <= kMaxSize, where, name, "a value in [1, 2^31]", v);
  };
  positive(c.n_layers, "n_layer");
  positive(c.n_heads, "n_head");
  positive(c.dim, "n_embd");
  positive(c.ffn_dim, "n_inner");
  positive(c.n_positions, "n_positions");
  positive(c.vocab_size, "vocab_size");
  check_arg(c.dim % c.n_heads == 0, where, "n_embd", "a multiple of n_head " + std::to_string(c.n_heads), c.dim);
  check_arg(c.vocab_size <= (std::int64_t{1} << 30), where, "vocab_size", "<= 2^30 (ids are i32)", c.vocab_size);
  check_arg(std::isfinite(c.ln_eps) && c.ln_eps >= 0.0f, where, "layer_norm_epsilon", "a finite value >= 0",
            c.ln_eps);
}

}  // namespace

Gpt2Config Gpt2Config::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string(kWhere) + ": " + path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return from_json_text(text.str(), path);
}

Gpt2Config Gpt2Config::from_json_text(std::string_view text, const std::string& source) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string(kWhere) + ": " + source + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) throw Error(std::string(kWhere) + ": " + source + ": expected a JSON object");
  const Reader r(root, source);
  const std::string model_type = r.optional_string("model_type", "gpt2");
  check_arg(model_type == "gpt2", r.where(), "model_type", "gpt2", model_type);
  // gelu_new, gelu_pytorch_tanh and gelu_fast all name the tanh approximation of GELU.
  const std::string act = r.optional_string("activation_function", "gelu_new");
  check_arg(act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast", r.where(), "activation_function",
            "gelu_new (the tanh GELU)", act);
  check_arg(!r.optional_bool("add_cross_attention", false), r.where(), "add_cross_attention",
            "false (a decoder-only model)", "true");
  check_arg(!r.optional_bool("scale_attn_by_inverse_layer_idx", false), r.where(), "scale_attn_by_inverse_layer_idx",
            "false", "true");

  Gpt2Config c;
  c.n_layers = r.required_int("n_layer");
  c.n_heads = r.required_int("n_head");
  c.dim = r.required_int("n_embd");
  c.n_positions = r.required_int("n_positions");
  c.vocab_size = r.required_int("vocab_size");
  c.ffn_dim = r.optional_int("n_inner").value_or(c.dim > 0 && c.dim <= kMaxSize ? 4 * c.dim : c.dim);
  c.ln_eps = static_cast<float>(r.optional_real("layer_norm_epsilon", 1e-5));
  c.scale_attn_weights = r.optional_bool("scale_attn_weights", true);
  check_config(c, r.where());
  return c;
}

void Gpt2Config::validate() const { check_config(*this, kWhere); }

}  // namespace ignis::engine
