# hone serve: OpenAI- and Ollama-compatible HTTP server with continuous batching.
find_path(HONE_HTTPLIB_INCLUDE httplib.h REQUIRED)
find_library(HONE_HTTPLIB_LIB NAMES cpp-httplib REQUIRED)
find_package(tomlplusplus REQUIRED)

hone_module_sources(SERVE_SRCS serve)
add_library(hone_serve STATIC ${SERVE_SRCS})
target_include_directories(hone_serve PRIVATE ${HONE_HTTPLIB_INCLUDE})
# Debian's cpp-httplib is a compiled library; without CPPHTTPLIB_OPENSSL_SUPPORT
# the header declares only the plain-HTTP server we use.
target_link_libraries(hone_serve PUBLIC hone_engine hone_hw hone_util nlohmann_json::nlohmann_json
                      PRIVATE ${HONE_HTTPLIB_LIB} tomlplusplus::tomlplusplus Threads::Threads)
target_link_libraries(hone PRIVATE hone_serve)
# Tuned profiles (issue 3) choose slots and run parameters when present.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/tune/module.cmake)
  target_link_libraries(hone_serve PRIVATE hone_tune)
  target_compile_definitions(hone_serve PRIVATE HONE_HAVE_TUNE=1)
endif()
