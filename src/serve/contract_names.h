// The backend contract's names (backend/backend.h), used unqualified inside
// serve: the local backend implements that contract, and its scheduler, jobs
// and prompt rendering speak its types throughout. Other folders write
// backend::GenerationRequest and so on.
#pragma once

#include "backend/backend.h"

namespace hone::serve {

using backend::Backend;
using backend::ChoiceResult;
using backend::Clock;
using backend::Completion;
using backend::CompletionEvent;
using backend::EmbeddingRequest;
using backend::Embeddings;
using backend::FinishReason;
using backend::FinishReasonName;
using backend::GenerationRequest;
using backend::Message;
using backend::ModelCard;
using backend::ResponseFormat;
using backend::Sampling;
using backend::Tool;
using backend::ToolCall;
using backend::ToolCallDelta;
using backend::ToolChoice;
using backend::Usage;

}  // namespace hone::serve
