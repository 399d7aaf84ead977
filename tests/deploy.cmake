# Kubernetes manifests (deploy/): every kustomize target renders with
# `kubectl kustomize` and each object validates against its schema
# (validate.test.mjs), and the rendered pod runs against this build's hone:
# the tune init step, the server from the Deployment's own args, and every
# probe path and metric name the manifests use (live.test.mjs). Needs
# deploy/validate/node_modules (scripts/install-node-deps.sh) and kubectl; the
# test fails with what to install when kubectl is missing.
# HONE_NODE: found in tests/CMakeLists.txt.
if(HONE_NODE)
  add_test(NAME deploy_manifests
           COMMAND ${HONE_NODE} --test --test-concurrency=1 validate.test.mjs live.test.mjs
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/validate)
  set_tests_properties(deploy_manifests PROPERTIES
    ENVIRONMENT "HONE_BINARY=$<TARGET_FILE:hone>;HONE_SHARED=${HONE_SHARED_DIR};HONE_TEST_TMP=${HONE_TEST_TMP}"
    TIMEOUT 600)
else()
  hone_node_missing("deploy: the manifest tests (deploy_manifests)")
endif()
