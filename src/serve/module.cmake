# hone serve's core: the Backend interface and the local engine behind it
# (model pool, registry, continuous-batching scheduler, metrics, config). No
# HTTP here: that is src/api.
find_package(tomlplusplus REQUIRED)

hone_module_sources(SERVE_SRCS serve)
add_library(hone_serve STATIC ${SERVE_SRCS})
target_link_libraries(hone_serve PUBLIC hone_backend hone_engine hone_hw hone_util nlohmann_json::nlohmann_json
                      PRIVATE tomlplusplus::tomlplusplus Threads::Threads)
target_link_libraries(hone PRIVATE hone_serve)
# Tuned profiles (issue 3) choose slots and run parameters when present.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/tune/module.cmake)
  target_link_libraries(hone_serve PRIVATE hone_tune)
  target_compile_definitions(hone_serve PRIVATE HONE_HAVE_TUNE=1)
endif()
