# hone tune: measured auto-tuning of llama.cpp run parameters (issue 3).
find_package(tomlplusplus REQUIRED)
hone_module_sources(TUNE_SRCS tune)
add_library(hone_tune STATIC ${TUNE_SRCS})
target_link_libraries(hone_tune PUBLIC hone_engine hone_hw hone_util nlohmann_json::nlohmann_json PRIVATE tomlplusplus::tomlplusplus Threads::Threads)
target_link_libraries(hone PRIVATE hone_tune)
