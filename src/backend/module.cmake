# The backend contract (backend.h): the Backend interface and the request and
# result types that api, route and serve share. It depends on util alone, so
# no feature folder has to include another to name a request.
hone_module_sources(BACKEND_SRCS backend)
add_library(hone_backend STATIC ${BACKEND_SRCS})
target_link_libraries(hone_backend PUBLIC hone_util nlohmann_json::nlohmann_json)
