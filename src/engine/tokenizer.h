// Text <-> tokens for a Model, and chat-template rendering.
// Thread-safe: llama.cpp's vocab is read-only after load.
#pragma once

#include <string>
#include <vector>

#include "engine/model.h"
#include "util/result.h"

namespace hone::engine {

using Token = int32_t;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

class Tokenizer {
 public:
  explicit Tokenizer(const Model& model);

  // add_special: BOS/EOS as the model wants; parse_special: "<|im_start|>" in
  // the text becomes the control token (only for text hone rendered itself).
  Result<std::vector<Token>> Encode(const std::string& text, bool add_special, bool parse_special) const;
  // Raw bytes of one token: may be part of a UTF-8 character (see Utf8Stream).
  std::string Piece(Token token, bool render_special = false) const;
  std::string Decode(const std::vector<Token>& tokens) const;  // sanitized UTF-8

  bool IsEndOfGeneration(Token token) const;
  Token bos() const;
  int n_vocab() const;

  // Renders messages with the model's own chat template (or `tmpl` if given),
  // with Jinja (engine/chat.h; parses the template on every call).
  // Errors: kUnsupported when the model has no template llama.cpp understands.
  Result<std::string> ApplyChatTemplate(const std::vector<ChatMessage>& messages, bool add_assistant_turn,
                                        const std::string& tmpl = "") const;

 private:
  const Model& model_;
};

}  // namespace hone::engine
