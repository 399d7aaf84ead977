// JSON mode: GBNF grammars that make the sampler produce JSON (any object, or
// one that follows a JSON schema), for response_format and Ollama's format.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "util/result.h"

namespace hone::serve {

// Any JSON object.
std::string JsonObjectGrammar();

// A grammar for the JSON Schema that structured output uses: type (or a list
// of types) object with properties in order (all emitted unless "required"
// names a subset), array (items, minItems, maxItems), string (minLength,
// maxLength), number, integer, boolean, null; enum, const, anyOf, oneOf, a
// one-element allOf, and local $ref ("#/$defs/x", recursion allowed). Other
// keywords are not enforced; a schema without a type is any JSON value.
// Errors: kInvalidArgument for a non-object schema, a remote or dangling
// $ref, a `false` schema, or a keyword with a value of the wrong type.
Result<std::string> JsonSchemaGrammar(const nlohmann::json& schema);

}  // namespace hone::serve
