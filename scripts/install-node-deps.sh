#!/usr/bin/env bash
# Installs the pinned npm packages of the serve client tests (tests/node):
# the official `openai`, `ollama` and `@anthropic-ai/sdk` clients, exactly as package-lock.json says.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"
if ! command -v npm >/dev/null; then
  echo "[hone] npm not found: install nodejs and npm (scripts/install-deps.sh)" >&2
  exit 1
fi
if [ ! -d node_modules/openai ] || [ ! -d node_modules/ollama ] || [ ! -d node_modules/@anthropic-ai/sdk ] || [ package-lock.json -nt node_modules ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
