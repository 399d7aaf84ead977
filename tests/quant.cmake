# Quantization lab (issue 4): unit tests beside the code, end-to-end tests of
# `hone quantize / imatrix / bench` against the peer llama.cpp tools.
hone_test(quant_tests
  ${SRC}/quant/eval_suite_test.cc
  ${SRC}/quant/report_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/integration/quant_test.cc
  LIBS hone_quant nlohmann_json::nlohmann_json)
target_compile_definitions(quant_tests PRIVATE HONE_PEER_BIN_DIR="${HONE_PEER_BIN_DIR}")
