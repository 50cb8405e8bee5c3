#include "engine/llama_config.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "ignis/error.h"

namespace ignis::engine {
namespace {

constexpr const char* kWhere = "llama config";

class Keys {
 public:
  Keys(const model::GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(const std::string& suffix) const { return arch_ + "." + suffix; }

  std::int64_t required_int(const std::string& suffix) const {
    const std::string k = key(suffix);
    check_arg(file_.has(k), kWhere, k, "an integer key", "none");
    return file_.get_int(k);
  }
  std::optional<std::int64_t> optional_int(const std::string& suffix) const {
    const std::string k = key(suffix);
    if (!file_.has(k)) return std::nullopt;
    return file_.get_int(k);
  }
  // Writers store these as f32; an f64 is accepted too.
  std::optional<double> optional_real(const std::string& suffix) const {
    const std::string k = key(suffix);
    const model::GgufValue* v = file_.find(k);
    if (v == nullptr) return std::nullopt;
    if (v->type() == model::GgufType::F64) return v->as<double>(k);
    return static_cast<double>(v->as<float>("llama config: " + k));
  }
  std::optional<std::string> optional_string(const std::string& suffix) const {
    return file_.get_optional<std::string>(key(suffix));
  }

 private:
  const model::GgufFile& file_;
  std::string arch_;
};

RopeScaling read_rope_scaling(const Keys& keys, std::int64_t context_length) {
  RopeScaling s;
  std::string type = keys.optional_string("rope.scaling.type").value_or("none");
  // Older files give only a linear factor.
  if (!keys.optional_string("rope.scaling.type") && keys.optional_real("rope.scale_linear")) type = "linear";
  const double factor =
      keys.optional_real("rope.scaling.factor").value_or(keys.optional_real("rope.scale_linear").value_or(1.0));
  if (type == "none") return s;
  if (type == "linear") {
    s.kind = RopeScalingKind::linear;
    s.factor = factor;
    return s;
  }
  if (type == "yarn") {
    s.kind = RopeScalingKind::yarn;
    s.factor = factor;
    s.original_max_position_embeddings =
        keys.optional_int("rope.scaling.original_context_length").value_or(context_length);
    s.beta_fast = keys.optional_real("rope.scaling.yarn_beta_fast").value_or(s.beta_fast);
    s.beta_slow = keys.optional_real("rope.scaling.yarn_beta_slow").value_or(s.beta_slow);
    return s;
  }
  fail_expected(kWhere, keys.key("rope.scaling.type"), "none, linear or yarn", type);
}

}  // namespace

LlamaConfig LlamaConfig::from_gguf(const model::GgufFile& file) {
  LlamaConfig c;
  check_arg(file.has("general.architecture"), kWhere, "general.architecture", "a string key", "none");
  c.architecture = file.get_string("general.architecture");
  check_arg(c.architecture == "llama" || c.architecture == "mistral", kWhere, "general.architecture",
            "llama or mistral", c.architecture);
  const Keys keys(file, c.architecture);
  c.n_layers = keys.required_int("block_count");
  c.dim = keys.required_int("embedding_length");
  c.ffn_dim = keys.required_int("feed_forward_length");
  c.n_heads = keys.required_int("attention.head_count");
  c.n_kv_heads = keys.optional_int("attention.head_count_kv").value_or(c.n_heads);
  c.context_length = keys.required_int("context_length");
  c.head_dim = keys.optional_int("attention.key_length").value_or(c.n_heads > 0 ? c.dim / c.n_heads : 0);
  if (const auto value_length = keys.optional_int("attention.value_length"))
    check_arg(*value_length == c.head_dim, kWhere, keys.key("attention.value_length"),
              "the key length " + std::to_string(c.head_dim), *value_length);
  c.rotary_dim = keys.optional_int("rope.dimension_count").value_or(c.head_dim);
  c.rope_theta = keys.optional_real("rope.freq_base").value_or(10000.0);
  c.rms_eps = static_cast<float>(keys.optional_real("attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_scaling = read_rope_scaling(keys, c.context_length);

  if (const auto v = keys.optional_int("vocab_size")) {
    c.vocab_size = *v;
  } else if (file.has("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<std::int64_t>(file.get_array_size("tokenizer.ggml.tokens"));
  } else if (const model::GgufTensor* t = file.find_tensor("token_embd.weight"); t != nullptr && t->shape.size() == 2) {
    c.vocab_size = t->shape[0];
  }
  c.validate();
  return c;
}

void LlamaConfig::validate() const {
  auto positive = [](std::int64_t v, const char* name) { check_arg(v > 0, kWhere, name, "> 0", v); };
  positive(n_layers, "block_count");
  positive(dim, "embedding_length");
  positive(ffn_dim, "feed_forward_length");
  positive(n_heads, "attention.head_count");
  positive(n_kv_heads, "attention.head_count_kv");
  positive(head_dim, "head_dim");
  positive(vocab_size, "vocab_size");
  positive(context_length, "context_length");
  check_arg(n_heads % n_kv_heads == 0, kWhere, "attention.head_count_kv",
            "a divisor of head_count " + std::to_string(n_heads), n_kv_heads);
  check_arg(head_dim % 2 == 0, kWhere, "head_dim", "an even number", head_dim);
  check_arg(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim, kWhere, "rope.dimension_count",
            "an even number in (0, head_dim = " + std::to_string(head_dim) + "]", rotary_dim);
  check_arg(std::isfinite(rope_theta) && rope_theta > 0.0, kWhere, "rope.freq_base", "a finite value > 0",
            rope_theta);
  check_arg(std::isfinite(rms_eps) && rms_eps >= 0.0f, kWhere, "attention.layer_norm_rms_epsilon",
            "a finite value >= 0", rms_eps);
  check_arg(vocab_size <= (std::int64_t{1} << 30), kWhere, "vocab_size", "<= 2^30 (ids are i32)", vocab_size);
  // rope_inv_freq checks the scaling parameters (factor > 0, yarn theta > 1, ...).
  try {
    (void)rope_inv_freq(rotary_dim, rope_theta, rope_scaling);
  } catch (const Error& e) {
    throw Error(std::string(kWhere) + ": rope scaling: " + e.what());
  }
}

}  // namespace ignis::engine
