# hone serve's HTTP edge: the server (the only code that sees cpp-httplib), one
# codec per API flavour (OpenAI, Ollama) and the one driver both use. It talks
# to a serve::Backend; nothing below it sees HTTP or JSON envelopes.
find_path(HONE_HTTPLIB_INCLUDE httplib.h REQUIRED)
find_library(HONE_HTTPLIB_LIB NAMES cpp-httplib REQUIRED)

hone_module_sources(API_SRCS api)
add_library(hone_api STATIC ${API_SRCS})
target_include_directories(hone_api PRIVATE ${HONE_HTTPLIB_INCLUDE})
# Debian's cpp-httplib is a compiled library; without CPPHTTPLIB_OPENSSL_SUPPORT
# the header declares only the plain-HTTP server we use.
target_link_libraries(hone_api PUBLIC hone_route hone_serve hone_util nlohmann_json::nlohmann_json
                      PRIVATE ${HONE_HTTPLIB_LIB} Threads::Threads)
target_link_libraries(hone PRIVATE hone_api)
