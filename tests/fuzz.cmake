# Fuzz targets (tests/fuzz): the OpenAI/Anthropic and Ollama request parsers,
# the JSON-schema-to-grammar converter and the GGUF header reader.
#
# Each is built twice: fuzz_X_smoke, with the project's own compiler and a
# small driver (tests/fuzz/standalone_main.cc) that CTest runs over the seed
# corpus and a few thousand mutations; and, with -DHONE_FUZZ=ON under clang,
# fuzz_X, a libFuzzer binary (bench/fuzz.sh runs those for millions of inputs).
set(HONE_FUZZ_TARGETS openai_request ollama_request json_schema gguf_header)
set(HONE_FUZZ_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
# GGUF seeds are written at configure time (small headers, not models).
find_package(Python3 COMPONENTS Interpreter REQUIRED)
set(HONE_GGUF_SEEDS ${PROJECT_BINARY_DIR}/fuzz-seeds/gguf_header)
execute_process(COMMAND ${Python3_EXECUTABLE} ${HONE_FUZZ_DIR}/make_gguf_seeds.py ${HONE_GGUF_SEEDS}
                RESULT_VARIABLE _seeds_rc)
if(NOT _seeds_rc EQUAL 0)
  message(FATAL_ERROR "tests/fuzz/make_gguf_seeds.py failed")
endif()

foreach(t ${HONE_FUZZ_TARGETS})
  if(t STREQUAL "gguf_header")
    set(_corpus ${HONE_GGUF_SEEDS})
  else()
    set(_corpus ${HONE_FUZZ_DIR}/corpus/${t})
  endif()
  add_executable(fuzz_${t}_smoke ${HONE_FUZZ_DIR}/fuzz_${t}.cc ${HONE_FUZZ_DIR}/standalone_main.cc)
  target_include_directories(fuzz_${t}_smoke PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(fuzz_${t}_smoke PRIVATE hone_api)
  add_test(NAME fuzz_smoke_${t} COMMAND fuzz_${t}_smoke ${_corpus} 20000)
  set_tests_properties(fuzz_smoke_${t} PROPERTIES TIMEOUT 300)
  if(HONE_FUZZ)
    add_executable(fuzz_${t} ${HONE_FUZZ_DIR}/fuzz_${t}.cc)
    target_include_directories(fuzz_${t} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(fuzz_${t} PRIVATE hone_api)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  endif()
endforeach()
