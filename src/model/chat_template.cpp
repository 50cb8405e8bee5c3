#include "model/chat_template.h"

#include <string_view>

namespace ignis::model {

namespace {

constexpr std::string_view kStart = "<|im_start|>";
constexpr std::string_view kEnd = "<|im_end|>";

// Templates write the newline either raw inside a Jinja string literal or as the escape "\n".
std::optional<std::size_t> skip_newline(const std::string& s, std::size_t pos) {
  if (s.compare(pos, 1, "\n") == 0) return pos + 1;
  if (s.compare(pos, 2, "\\n") == 0) return pos + 2;
  return std::nullopt;
}

std::string unescape_newlines(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A default system prompt is a string literal "<|im_start|>system\n...<|im_end|>" whose text
// has no Jinja expression in it (a template that formats messages[0] joins strings with '+').
std::optional<std::string> find_default_system(const std::string& jinja) {
  const std::string header = std::string(kStart) + "system";
  for (std::size_t at = jinja.find(header); at != std::string::npos; at = jinja.find(header, at + 1)) {
    const auto body = skip_newline(jinja, at + header.size());
    if (!body) continue;
    const std::size_t end = jinja.find(kEnd, *body);
    if (end == std::string::npos) continue;
    const std::string_view text(jinja.data() + *body, end - *body);
    if (text.find_first_of("'\"{}+") != std::string_view::npos) continue;
    return unescape_newlines(text);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ChatFormat> ChatFormat::recognize(const std::string& jinja) {
  if (jinja.find(kStart) == std::string::npos || jinja.find(kEnd) == std::string::npos) return std::nullopt;
  ChatFormat f;
  f.default_system_ = find_default_system(jinja);
  return f;
}

std::string ChatFormat::apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  std::string out;
  auto turn = [&out](std::string_view role, std::string_view content) {
    out.append(kStart).append(role).append("\n").append(content).append(kEnd).append("\n");
  };
  if (default_system_ && !messages.empty() && messages.front().role != "system") turn("system", *default_system_);
  for (const ChatMessage& m : messages) turn(m.role, m.content);
  if (add_generation_prompt) out.append(kStart).append("assistant\n");
  return out;
}

}  // namespace ignis::model
