# Router tests: pure policy on a simulated clock, and the upstream HTTP client
# against real loopback servers (cpp-httplib, openssl s_server for TLS).
hone_test(route_tests
  ${SRC}/route/breaker_test.cc
  ${SRC}/route/http_client_test.cc
  ${SRC}/route/config_test.cc
  ${SRC}/route/replica_picker_test.cc
  ${SRC}/route/key_queue_test.cc
  LIBS hone_route ${HONE_HTTPLIB_LIB} Threads::Threads)
target_include_directories(route_tests SYSTEM PRIVATE ${HONE_HTTPLIB_INCLUDE})

# The spend ledger on SQLite and on a real PostgreSQL (the "pg" fixture).
hone_test(ledger_tests
  ${SRC}/route/ledger_test.cc
  LIBS hone_route Threads::Threads
  PROPERTIES FIXTURES_REQUIRED pg)
