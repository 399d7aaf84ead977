hone_test(cli_tests ${CMAKE_CURRENT_SOURCE_DIR}/integration/cli_test.cc LIBS nlohmann_json::nlohmann_json)
target_compile_definitions(cli_tests PRIVATE HONE_PEER_BIN_DIR="${HONE_PEER_BIN_DIR}")
