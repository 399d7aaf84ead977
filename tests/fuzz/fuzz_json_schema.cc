// libFuzzer target: a response_format JSON schema through hone's
// schema-to-grammar converter (depth and size limits, escaping).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/json_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The converter sees what the HTTP layer lets through: JSON of bounded depth.
  nlohmann::json schema = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  (void)hone::serve::JsonSchemaGrammar(schema);
  return 0;
}
