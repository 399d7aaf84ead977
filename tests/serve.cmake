# hone serve: unit tests (scheduler, registry, pool, config; the HTTP edge's are
# in api.cmake) and the end-to-end
# client tests with the official openai, ollama and @anthropic-ai/sdk npm packages (tests/node).
hone_test(serve_tests
  ${SRC}/serve/scheduler_test.cc
  ${SRC}/serve/draft_cost_test.cc
  ${SRC}/serve/json_grammar_test.cc
  ${SRC}/serve/registry_test.cc
  ${SRC}/serve/model_pool_test.cc
  ${SRC}/serve/local_backend_test.cc
  ${SRC}/serve/prompt_cache_test.cc
  LIBS hone_serve nlohmann_json::nlohmann_json)

# HONE_NODE: found in tests/CMakeLists.txt. Needs tests/node/node_modules: test.sh runs scripts/install-node-deps.sh first.
if(HONE_NODE)
  add_test(NAME serve_node_clients
           COMMAND ${HONE_NODE} --test --test-concurrency=1
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/node)
  set_tests_properties(serve_node_clients PROPERTIES
    ENVIRONMENT "HONE_BINARY=$<TARGET_FILE:hone>;HONE_SHARED=${HONE_SHARED_DIR};HONE_TEST_TMP=${HONE_TEST_TMP};HONE_PEER_BIN_DIR=${HONE_PEER_BIN_DIR}"
    TIMEOUT 600)
  # The web console (/ui/) in headless Chromium (Debian's chromium, driven by
  # puppeteer-core): its own entry, so the client suite keeps its time limit.
  add_test(NAME console_browser
           COMMAND ${HONE_NODE} --test --test-concurrency=1 console.browser.mjs
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/node)
  set_tests_properties(console_browser PROPERTIES
    ENVIRONMENT "HONE_BINARY=$<TARGET_FILE:hone>;HONE_SHARED=${HONE_SHARED_DIR};HONE_TEST_TMP=${HONE_TEST_TMP}"
    TIMEOUT 300)
  # Budgets and the spend ledger, with a real PostgreSQL (the "pg" fixture).
  add_test(NAME route_spend_node
           COMMAND ${HONE_NODE} --test --test-concurrency=1 spend.spec.mjs
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/node)
  set_tests_properties(route_spend_node PROPERTIES
    ENVIRONMENT "HONE_BINARY=$<TARGET_FILE:hone>;HONE_SHARED=${HONE_SHARED_DIR};HONE_TEST_TMP=${HONE_TEST_TMP}"
    FIXTURES_REQUIRED pg
    TIMEOUT 600)
else()
  hone_node_missing("serve: the client tests (serve_node_clients, route_spend_node)")
endif()
if(TARGET hone_tune)
  target_link_libraries(serve_tests PRIVATE hone_tune)
  target_compile_definitions(serve_tests PRIVATE HONE_HAVE_TUNE=1)
endif()
