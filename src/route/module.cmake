# hone's router: upstream HTTP client (libcurl), circuit breakers, key
# rotation, retries; routes over the local backend and remote upstreams.
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(tomlplusplus REQUIRED)
# The spend ledger: SQLite (one process) and PostgreSQL (shared by replicas).
find_package(SQLite3 REQUIRED)
find_package(PostgreSQL REQUIRED)
hone_module_sources(ROUTE_SRCS route)
add_library(hone_route STATIC ${ROUTE_SRCS})
target_link_libraries(hone_route PUBLIC hone_backend hone_serve hone_util nlohmann_json::nlohmann_json
                      PRIVATE CURL::libcurl OpenSSL::Crypto SQLite::SQLite3 PostgreSQL::PostgreSQL tomlplusplus::tomlplusplus Threads::Threads)
target_link_libraries(hone PRIVATE hone_route)
