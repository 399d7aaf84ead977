# hone's router: upstream HTTP client (libcurl), circuit breakers, key
# rotation, retries; routes over the local backend and remote upstreams.
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(tomlplusplus REQUIRED)
hone_module_sources(ROUTE_SRCS route)
add_library(hone_route STATIC ${ROUTE_SRCS})
target_link_libraries(hone_route PUBLIC hone_serve hone_util nlohmann_json::nlohmann_json
                      PRIVATE CURL::libcurl OpenSSL::Crypto tomlplusplus::tomlplusplus Threads::Threads)
target_link_libraries(hone PRIVATE hone_route)
