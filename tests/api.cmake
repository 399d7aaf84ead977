# hone serve's HTTP edge: message validation and field types on every API,
# the driver over a fake backend, the disconnect check,
# the gate's reading of where a request ends.
# The end-to-end client tests are in serve.cmake.
hone_test(api_tests
  ${SRC}/api/messages_test.cc
  ${SRC}/api/driver_test.cc
  ${SRC}/api/origin_check_test.cc
  ${SRC}/api/message_types_test.cc
  ${SRC}/api/request_framing_test.cc
  ${SRC}/api/connection_gate_test.cc
  ${SRC}/api/serve_settings_test.cc
  ${SRC}/api/console_test.cc
  LIBS hone_api nlohmann_json::nlohmann_json)
