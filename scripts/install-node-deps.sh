#!/usr/bin/env bash
# Installs the pinned npm packages of the node tests, exactly as each
# package-lock.json says:
# - tests/node: the serve client tests, with the official `openai`, `ollama`
#   and `@anthropic-ai/sdk` clients, and puppeteer-core for the console's
#   browser tests;
# - web/console: the web console's Preact and uPlot, bundled by esbuild into
#   the binary at build time;
# - deploy/validate: the Kubernetes manifest checks, with `kubernetes-models`,
#   its prometheus-operator, Gateway API and KEDA models, `ajv` and `yaml`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null; then
  echo "[hone] npm not found: install nodejs and npm (scripts/install-deps.sh)" >&2
  exit 1
fi
(
  cd tests/node
  if [ ! -d node_modules/openai ] || [ ! -d node_modules/ollama ] || [ ! -d node_modules/@anthropic-ai/sdk ] ||
    [ ! -d node_modules/puppeteer-core ] || [ package-lock.json -nt node_modules ]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
)
(
  cd web/console
  if [ ! -d node_modules/preact ] || [ ! -d node_modules/uplot ] || [ ! -d node_modules/esbuild ] || [ package-lock.json -nt node_modules ]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
)
(
  cd deploy/validate
  if [ ! -d node_modules/kubernetes-models ] || [ ! -d node_modules/ajv ] || [ package-lock.json -nt node_modules ]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
)
