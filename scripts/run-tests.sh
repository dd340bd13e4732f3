#!/usr/bin/env bash
# Runs the whole test suite on the real local engines (tiny LLM, MiniLM, embedded Postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest "$@"
