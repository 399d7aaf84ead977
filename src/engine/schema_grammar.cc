#include "engine/schema_grammar.h"

#include <json-schema-to-grammar.h>
#include <json.h>

#include <exception>

namespace hone::engine {

Result<std::string> LlamaJsonSchemaGrammar(const std::string& schema) {
  try {
    return json_schema_to_grammar(common_json::parse(schema));
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument, std::string("llama.cpp's converter refused the schema: ") + e.what());
  }
}

}  // namespace hone::engine
