// JSON mode: GBNF grammars that make the sampler produce JSON (any object, or
// one that follows a JSON schema), for response_format and Ollama's format.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "util/result.h"

namespace hone::serve {

// Any JSON object.
std::string JsonObjectGrammar();

// A grammar for a subset of JSON Schema: type object (properties in order,
// every property emitted), array (items, minItems), string, number, integer,
// boolean, null, enum, const. Anything else becomes "any JSON value".
// Errors: kInvalidArgument when the schema is not an object.
Result<std::string> JsonSchemaGrammar(const nlohmann::json& schema);

}  // namespace hone::serve
