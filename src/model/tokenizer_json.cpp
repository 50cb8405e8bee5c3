// Tokenizer::from_hf_json: a Hugging Face tokenizer.json of a byte-level BPE model, plus the
// tokenizer_config.json beside it for bos/eos and the chat template.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ignis/error.h"
#include "model/tokenizer.h"

namespace ignis::model {

namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("tokenizer: " + path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    throw Error("tokenizer: " + path + ": not valid JSON: " + e.what());
  }
}

std::string shown(const json& j) {
  constexpr std::size_t kMax = 200;
  std::string s = j.dump();
  return s.size() > kMax ? s.substr(0, kMax) + "..." : s;
}

bool is_true(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_boolean() && obj[key].get<bool>();
}

// The two pre-tokenizers the engine has: plain ByteLevel (GPT-2) and SmolLM's digits-then-ByteLevel.
PreTokenizer parse_pre_tokenizer(const json& pre, const std::string& where) {
  auto byte_level_ok = [](const json& p) {
    return p.is_object() && p.value("type", "") == "ByteLevel" && !is_true(p, "add_prefix_space") &&
           p.value("use_regex", true);
  };
  if (byte_level_ok(pre)) return PreTokenizer::Gpt2;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    const json& seq = pre["pretokenizers"];
    if (seq.is_array() && seq.size() == 2 && seq[0].is_object() && seq[0].value("type", "") == "Digits" &&
        is_true(seq[0], "individual_digits") && byte_level_ok(seq[1]))
      return PreTokenizer::SmolLM;
  }
  throw Error(where +
              ": pre_tokenizer not supported (only ByteLevel, or Digits(individual) then ByteLevel): " + shown(pre));
}

// A token named in tokenizer_config.json: a string, or an object with "content".
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

std::string config_chat_template(const json& config) {
  if (!config.contains("chat_template")) return {};
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const json& named : t)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template"))
        return named["template"].get<std::string>();
  }
  return {};
}

}  // namespace

Tokenizer Tokenizer::from_hf_json(const std::string& path) {
  const std::string where = "tokenizer: " + path;
  const json root = read_json(path);
  TokenizerSpec spec;
  spec.source = path;
  try {
    if (!root.is_object() || !root.contains("model") || !root["model"].is_object())
      throw Error(where + ": no \"model\" object");
    const json& model = root["model"];
    const std::string type = model.value("type", "");
    if (type != "BPE") throw Error(where + ": tokenizer model '" + type + "' not supported (only BPE)");
    if (is_true(model, "ignore_merges")) throw Error(where + ": BPE ignore_merges not supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
        throw Error(where + ": BPE " + key + " not supported");
    if (root.contains("normalizer") && !root["normalizer"].is_null())
      throw Error(where + ": normalizer not supported: " + shown(root["normalizer"]));
    if (!root.contains("pre_tokenizer")) throw Error(where + ": no \"pre_tokenizer\"");
    spec.pre = parse_pre_tokenizer(root["pre_tokenizer"], where);

    if (!model.contains("vocab") || !model["vocab"].is_object()) throw Error(where + ": model has no \"vocab\" object");
    std::vector<std::pair<std::int64_t, std::string>> entries;
    for (const auto& [text, id] : model["vocab"].items()) entries.emplace_back(id.get<std::int64_t>(), text);
    const json added = root.value("added_tokens", json::array());
    for (const json& a : added)
      entries.emplace_back(a.at("id").get<std::int64_t>(), a.at("content").get<std::string>());
    std::int64_t n = 0;
    for (const auto& e : entries) {
      if (e.first < 0 || e.first >= INT32_MAX)
        fail_expected(where, "token id of '" + e.second + "'", "an id in [0, 2^31 - 1)", e.first);
      n = std::max(n, e.first + 1);
    }
    spec.tokens.assign(static_cast<std::size_t>(n), {});
    std::vector<bool> seen(static_cast<std::size_t>(n), false);
    for (const auto& [id, text] : entries) {
      spec.tokens[id] = text;
      seen[id] = true;
    }
    for (std::int64_t id = 0; id < n; ++id)
      if (!seen[id]) throw Error(where + ": token id " + std::to_string(id) + " has no token (the ids have a gap)");
    spec.types.assign(spec.tokens.size(), TokenType::Normal);
    for (const json& a : added) {
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (is_true(a, flag))
          throw Error(where + ": added token '" + a.at("content").get<std::string>() + "': " + flag + " not supported");
      spec.types[a.at("id").get<std::int64_t>()] = is_true(a, "special") ? TokenType::Control : TokenType::UserDefined;
    }

    if (!model.contains("merges") || !model["merges"].is_array())
      throw Error(where + ": model has no \"merges\" array");
    for (const json& m : model["merges"]) {
      // Older files write "left right", newer ones ["left", "right"].
      if (m.is_array() && m.size() == 2) {
        spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        continue;
      }
      const std::string s = m.is_string() ? m.get<std::string>() : std::string();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size() ||
          s.find(' ', space + 1) != std::string::npos)
        throw Error(where + ": merge " + shown(m) + ": expected two tokens separated by one space");
      spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    }
  } catch (const json::exception& e) {
    throw Error(where + ": unexpected structure: " + e.what());
  }

  const auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    const json config = read_json(config_path.string());
    auto id_of = [&](const std::optional<std::string>& text) -> std::optional<std::int64_t> {
      if (!text) return std::nullopt;
      for (std::size_t i = 0; i < spec.tokens.size(); ++i)
        if (spec.tokens[i] == *text) return static_cast<std::int64_t>(i);
      throw Error("tokenizer: " + config_path.string() + ": token '" + *text + "' is not in the vocabulary");
    };
    spec.bos_id = id_of(config_token(config, "bos_token"));
    spec.eos_id = id_of(config_token(config, "eos_token"));
    spec.chat_template = config_chat_template(config);
  }
  return from_spec(std::move(spec));
}

}  // namespace ignis::model
