find_package(tomlplusplus REQUIRED)
hone_test(tune_tests
  ${SRC}/tune/search_test.cc
  ${SRC}/tune/search_space_test.cc
  ${SRC}/tune/profile_test.cc
  ${SRC}/tune/affinity_test.cc
  ${SRC}/tune/flags_test.cc
  LIBS hone_tune hone_hw nlohmann_json::nlohmann_json tomlplusplus::tomlplusplus)
# Real tunes through the hone binary. A tune measures the machine, so each
# runs alone (PROCESSORS 2 takes both of CTest's -j2 places): two tunes side
# by side on 2 cores starve each other's busy-waiting threads, and one with a
# 25 s budget took 535 s and ran out of budget after one trial.
hone_test(tune_cli_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/integration/tune_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/integration/tune_isolation_test.cc
  LIBS nlohmann_json::nlohmann_json tomlplusplus::tomlplusplus
  PROPERTIES PROCESSORS 2)
