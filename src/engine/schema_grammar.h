// llama.cpp's own JSON-schema-to-GBNF converter (common/json-schema-to-grammar,
// the one llama-server uses), behind hone's seam. hone serves with its own
// converter (serve/json_grammar.h: depth and size limits); this one is here to
// measure it against (bench/grammar_compare.cc).
#pragma once

#include <string>

#include "util/result.h"

namespace hone::engine {

// `schema` is JSON text. Errors: kInvalidArgument (not JSON, or the library
// refused it: its exception's message).
Result<std::string> LlamaJsonSchemaGrammar(const std::string& schema);

}  // namespace hone::engine
