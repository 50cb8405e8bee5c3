#pragma once
// Chat formatting without a Jinja engine: the model's template is recognized by its markers and
// reproduced by hand. Only ChatML (<|im_start|>role\ncontent<|im_end|>\n) is supported.
#include <optional>
#include <span>
#include <string>

namespace ignis::model {

struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatFormat {
 public:
  // nullopt when the template is not one this class can reproduce.
  static std::optional<ChatFormat> recognize(const std::string& jinja);

  // As the template renders `messages` (and the assistant header after them when asked).
  std::string apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  // The system prompt the template inserts when the first message is not a system message.
  const std::optional<std::string>& default_system() const { return default_system_; }

 private:
  std::optional<std::string> default_system_;
};

}  // namespace ignis::model
