find_package(tomlplusplus REQUIRED)
hone_test(tune_tests
  ${SRC}/tune/search_test.cc
  ${SRC}/tune/search_space_test.cc
  ${SRC}/tune/profile_test.cc
  ${SRC}/tune/affinity_test.cc
  ${SRC}/tune/flags_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/integration/tune_test.cc
  LIBS hone_tune hone_hw nlohmann_json::nlohmann_json tomlplusplus::tomlplusplus)
