#!/usr/bin/env bash
# Installs the pinned npm packages of the node tests, exactly as each
# package-lock.json says:
# - tests/node: the serve client tests, with the official `openai`, `ollama`
#   and `@anthropic-ai/sdk` clients;
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
  if [ ! -d node_modules/openai ] || [ ! -d node_modules/ollama ] || [ ! -d node_modules/@anthropic-ai/sdk ] || [ package-lock.json -nt node_modules ]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
)
(
  cd deploy/validate
  if [ ! -d node_modules/kubernetes-models ] || [ ! -d node_modules/ajv ] || [ package-lock.json -nt node_modules ]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
)
