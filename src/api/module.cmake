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

# The web console (web/console, served at /ui/): esbuild bundles it and
# build.mjs writes it as one C++ file of byte arrays, so the binary carries
# its page and fetches nothing at run time. Needs node and the console's npm
# packages (scripts/install-node-deps.sh, which setup.sh runs).
# -DHONE_CONSOLE=OFF builds without it (no node needed; /ui/ then says so).
option(HONE_CONSOLE "Build the web console into hone (needs node and web/console's npm packages)" ON)
set(HONE_CONSOLE_DIR ${PROJECT_SOURCE_DIR}/web/console)
set(HONE_CONSOLE_OUT ${CMAKE_BINARY_DIR}/console)
if(HONE_CONSOLE)
  find_program(HONE_NODE node)
  if(NOT HONE_NODE OR NOT EXISTS ${HONE_CONSOLE_DIR}/node_modules/esbuild)
    message(FATAL_ERROR "the web console (web/console) needs node and its npm packages: run "
                        "scripts/install-node-deps.sh, or configure with -DHONE_CONSOLE=OFF")
  endif()
  file(GLOB_RECURSE HONE_CONSOLE_SRCS CONFIGURE_DEPENDS ${HONE_CONSOLE_DIR}/src/*)
  add_custom_command(OUTPUT ${HONE_CONSOLE_OUT}/console_assets.cc
    COMMAND ${HONE_NODE} ${HONE_CONSOLE_DIR}/build.mjs ${HONE_CONSOLE_OUT}
    DEPENDS ${HONE_CONSOLE_SRCS} ${HONE_CONSOLE_DIR}/build.mjs ${HONE_CONSOLE_DIR}/package-lock.json
    COMMENT "Bundling the web console (esbuild)" VERBATIM)
else()
  file(WRITE ${HONE_CONSOLE_OUT}/console_assets.cc
       "// HONE_CONSOLE=OFF: no web console.\n#include \"api/console_assets.h\"\n"
       "namespace hone::api {\nconst std::vector<ConsoleAsset>& ConsoleAssets() {\n"
       "  static const std::vector<ConsoleAsset> none;\n  return none;\n}\n}  // namespace hone::api\n")
endif()
list(APPEND API_SRCS ${HONE_CONSOLE_OUT}/console_assets.cc)
add_library(hone_api STATIC ${API_SRCS})
target_include_directories(hone_api SYSTEM PRIVATE ${HONE_HTTPLIB_INCLUDE})
find_package(tomlplusplus REQUIRED)
target_link_libraries(hone_api PUBLIC hone_route hone_serve hone_util nlohmann_json::nlohmann_json
                      PRIVATE ${HONE_HTTPLIB_LIB} tomlplusplus::tomlplusplus Threads::Threads)
target_link_libraries(hone PRIVATE hone_api)
