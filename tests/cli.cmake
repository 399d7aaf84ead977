hone_test(cli_tests ${CMAKE_CURRENT_SOURCE_DIR}/integration/cli_test.cc LIBS nlohmann_json::nlohmann_json)
target_compile_definitions(cli_tests PRIVATE HONE_PEER_BIN_DIR="${HONE_PEER_BIN_DIR}")
hone_test(isa_tests ${CMAKE_CURRENT_SOURCE_DIR}/integration/isa_test.cc LIBS nlohmann_json::nlohmann_json)
target_compile_definitions(isa_tests PRIVATE HONE_PEER_BIN_DIR="${HONE_PEER_BIN_DIR}")
# setup.sh's main job, exactly as setup.sh runs it (scripts/main-job.sh), on a
# models folder of its own.
add_test(NAME setup_main_job
  COMMAND ${CMAKE_COMMAND} -E env HONE=$<TARGET_FILE:hone> MODELS_DIR=${HONE_TEST_TMP}/main-job
          bash ${PROJECT_SOURCE_DIR}/scripts/main-job.sh)
set_tests_properties(setup_main_job PROPERTIES TIMEOUT 900)
