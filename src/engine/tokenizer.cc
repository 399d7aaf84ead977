#include "engine/tokenizer.h"

#include <llama.h>

#include "engine/chat.h"
#include "engine/utf8.h"

namespace hone::engine {

Tokenizer::Tokenizer(const Model& model) : model_(model) {}

Result<std::vector<Token>> Tokenizer::Encode(const std::string& text, bool add_special,
                                             bool parse_special) const {
  if (text.size() > static_cast<size_t>(INT32_MAX / 2)) {
    return MakeError(ErrorCode::kInvalidArgument, "text too long to tokenize");
  }
  std::vector<Token> tokens(text.size() + 8);
  int n = llama_tokenize(model_.vocab(), text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                         static_cast<int32_t>(tokens.size()), add_special, parse_special);
  if (n < 0) {
    tokens.resize(-n);
    n = llama_tokenize(model_.vocab(), text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                       static_cast<int32_t>(tokens.size()), add_special, parse_special);
  }
  if (n < 0) return MakeError(ErrorCode::kInternal, "tokenization failed");
  tokens.resize(n);
  return tokens;
}

std::string Tokenizer::Piece(Token token, bool render_special) const {
  char buf[256];
  int n = llama_token_to_piece(model_.vocab(), token, buf, sizeof buf, 0, render_special);
  if (n >= 0) return std::string(buf, n);
  std::string big(-n, '\0');
  n = llama_token_to_piece(model_.vocab(), token, big.data(), static_cast<int32_t>(big.size()), 0,
                           render_special);
  big.resize(n > 0 ? n : 0);
  return big;
}

std::string Tokenizer::Decode(const std::vector<Token>& tokens) const {
  std::string bytes;
  for (Token t : tokens) bytes += Piece(t);
  return SanitizeUtf8(bytes);
}

bool Tokenizer::IsEndOfGeneration(Token token) const { return llama_vocab_is_eog(model_.vocab(), token); }
Token Tokenizer::bos() const { return llama_vocab_bos(model_.vocab()); }
int Tokenizer::n_vocab() const { return llama_vocab_n_tokens(model_.vocab()); }

Result<std::string> Tokenizer::ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                                 bool add_assistant_turn,
                                                 const std::string& tmpl_override) const {
  // Jinja, through llama.cpp's chat library (engine/chat.h), as hone serve renders.
  auto tmpl = ChatTemplate::ForModel(model_, tmpl_override);
  if (!tmpl) return tmpl.error();
  ChatInput in;
  for (const auto& m : messages) in.turns.push_back({m.role, m.content, {}, "", ""});
  in.add_generation_prompt = add_assistant_turn;
  auto plan = (*tmpl)->Render(in);
  if (!plan) return plan.error();
  return plan->prompt;
}

}  // namespace hone::engine
