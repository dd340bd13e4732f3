#!/usr/bin/env bash
# Runs the whole test suite on the real local engines (tiny LLM, MiniLM, embedded Postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
# The tiny test model needs little KV cache; 1 GiB per vLLM process keeps the few servers and
# in-process engines a run starts well inside a 24 GiB machine.
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
# the frameworks' own test suites the conformance tests run (downloaded once)
./scripts/conformance-sources.sh
# the 30 slowest tests (ACCEL_TEST_DURATIONS=0: every test), so the suite's time can be followed from any run (docs/testing.md)
exec .venv/bin/python -m pytest --durations="${ACCEL_TEST_DURATIONS:-30}" "$@"
