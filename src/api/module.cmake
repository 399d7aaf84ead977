# hone serve's HTTP edge: the server (the only code that sees cpp-httplib), one
# codec per API flavour (OpenAI, Ollama) and the one driver both use. It talks
# to a backend::Backend; nothing below it sees HTTP or JSON envelopes.
#
# cpp-httplib is the 0.54 that llama.cpp vendors in the pinned tree, built by
# scripts/build-llama.sh: it caps header lines (8 KiB) and counts (100),
# applies the body limit to chunked and compressed bodies, and grows its
# worker pool on demand. It is also the copy libllama-common exports, so one
# set of httplib symbols lives in the process (Debian's 0.11 beside it was an
# ODR hazard).
# In the cache, so tests/ (the route tests' loopback servers) sees them too.
set(HONE_HTTPLIB_INCLUDE ${HONE_LLAMA_SOURCE_DIR}/vendor/cpp-httplib CACHE INTERNAL "")
set(HONE_HTTPLIB_LIB ${_llama_prefix}/vendor/lib/libcpp-httplib.a CACHE INTERNAL "")
if(NOT EXISTS "${HONE_HTTPLIB_INCLUDE}/httplib.h" OR NOT EXISTS "${HONE_HTTPLIB_LIB}")
  message(FATAL_ERROR "llama.cpp's vendored cpp-httplib was not found: build llama.cpp with "
                      "scripts/build-llama.sh and pass -DHONE_LLAMA_SOURCE_DIR=<its source tree>")
endif()

hone_module_sources(API_SRCS api)
add_library(hone_api STATIC ${API_SRCS})
target_include_directories(hone_api SYSTEM PRIVATE ${HONE_HTTPLIB_INCLUDE})
find_package(tomlplusplus REQUIRED)
target_link_libraries(hone_api PUBLIC hone_route hone_serve hone_util nlohmann_json::nlohmann_json
                      PRIVATE ${HONE_HTTPLIB_LIB} tomlplusplus::tomlplusplus Threads::Threads)
target_link_libraries(hone PRIVATE hone_api)
