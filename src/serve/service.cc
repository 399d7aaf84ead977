#include "serve/service.h"

namespace hone::serve {

Running::~Running() {
  for (auto& j : jobs) j->Cancel();
}

Result<std::vector<engine::Token>> Service::ChatPrompt(const engine::Model& model,
                                                       const std::vector<engine::ChatMessage>& messages) {
  engine::Tokenizer tok(model);
  auto rendered = tok.ApplyChatTemplate(messages, /*add_assistant_turn=*/true);
  if (rendered) return tok.Encode(*rendered, /*add_special=*/false, /*parse_special=*/true);
  // No template in the GGUF (base models such as stories260K): a plain
  // transcript, never parsing special tokens out of user text.
  std::string text;
  for (const auto& m : messages) {
    std::string role = m.role.empty() ? "user" : m.role;
    role[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(role[0])));
    text += role + ": " + m.content + "\n";
  }
  text += "Assistant:";
  return tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
}

std::shared_ptr<Running> Service::Start(const GenRequest& r, ApiFlavor flavor, ApiError* err) {
  auto lease = pool_.Acquire(r.model, r.keep_alive_s);
  if (!lease) {
    *err = FromError(lease.error());
    return nullptr;
  }
  auto run = std::make_shared<Running>();
  run->lease = std::move(*lease);
  run->client_gone = r.client_gone;
  run->model = (*run->lease)->name;
  if (run->lease->just_loaded) run->load_seconds = (*run->lease)->load_seconds;
  const engine::Model& model = *(*run->lease)->model;
  std::vector<std::vector<engine::Token>> prompts;
  if (r.chat) {
    if (r.messages.empty()) {
      *err = BadRequest("'messages' must not be empty");
      return nullptr;
    }
    auto p = ChatPrompt(model, r.messages);
    if (!p) {
      *err = FromError(p.error());
      return nullptr;
    }
    prompts.push_back(std::move(*p));
  } else {
    engine::Tokenizer tok(model);
    for (const auto& text : r.prompts) {
      // A completion prompt is the caller's own template, special tokens
      // included ("<|im_start|>"), as llama-server, vLLM and Ollama's raw mode read it.
      auto p = tok.Encode(text, /*add_special=*/!r.raw, /*parse_special=*/true);
      if (!p) {
        *err = FromError(p.error());
        return nullptr;
      }
      if (p->empty()) {
        *err = BadRequest("the prompt is empty");
        return nullptr;
      }
      prompts.push_back(std::move(*p));
    }
  }
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
  Scheduler& sched = *(*run->lease)->scheduler;
  for (auto& p : prompts) {
    auto job = std::make_shared<Job>(std::move(p), r.max_tokens, r.sampling, r.stop, deadline);
    auto submitted = sched.Submit(job);
    if (!submitted) {
      *err = FromError(submitted.error());
      return nullptr;
    }
    if (*submitted != SubmitResult::kOk) {
      metrics_.Add(metric::kRejected, run->model);
      *err = QueueFull(flavor);
      return nullptr;  // ~Running cancels the jobs already queued
    }
    run->jobs.push_back(std::move(job));
  }
  return run;
}

}  // namespace hone::serve
