// The one place that drives a request against a Backend, for every codec:
// parse the body, start the work, then either collect the whole answer or
// stream it, cancel it when the client goes away, fill the log line, and turn
// failures into the codec's errors. Codecs (codec.h) only translate.
//
//   body ──codec.Parse──> GenerationRequest ──backend.Start──> Completion
//        <──codec frames── Next(deadline) events: text, choice end, done
#pragma once

#include "api/codec.h"
#include "api/http_types.h"
#include "backend/backend.h"

namespace hone::api {

class Driver {
 public:
  explicit Driver(backend::Backend& backend) : backend_(backend) {}

  // Thread-safe: each call is one request. The codec must outlive the
  // response (a stream refers to it until it ends).
  HttpResponse Generate(const GenerationCodec& codec, const HttpRequest& req);
  HttpResponse Embed(const EmbeddingCodec& codec, const HttpRequest& req);
  HttpResponse ListModels(const ModelListCodec& codec);
  // The prompt tokens a request comes to, rendered as Generate would
  // (GenerationCodec::ParsePrompt, Backend::CountPromptTokens).
  HttpResponse CountTokens(const GenerationCodec& codec, const HttpRequest& req);

 private:
  HttpResponse LoadOnly(const GenerationCodec& codec, const backend::GenerationRequest& r);
  backend::Backend& backend_;
};

}  // namespace hone::api
