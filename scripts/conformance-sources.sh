#!/usr/bin/env bash
# Fetches the frameworks' own test suites for tests/conformance: langchain-core, LangGraph and
# langgraph-prebuilt (ToolNode, the ReAct agent) ship their tests only in their source distributions, so the installed version's sdist is
# downloaded from the package index once (into .accel/conformance, git-ignored) and unpacked.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
dest=.accel/conformance

# fetch DISTRIBUTION TESTS: the installed DISTRIBUTION's sdist, unless its TESTS folder is there
fetch() {
    local name=$1 tests=$2 version folder
    version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('$name'))")
    folder="${name//-/_}-$version"
    if [ ! -d "$dest/$folder/$tests" ]; then
        echo "[setup] fetching $name $version's own tests (its source distribution)"
        mkdir -p "$dest"
        .venv/bin/python -m pip download -q --no-deps --no-binary :all: "$name==$version" -d "$dest"
        tar xzf "$dest/$folder.tar.gz" -C "$dest"
    fi
}

fetch langchain-core tests/unit_tests
fetch langgraph tests
fetch langgraph-prebuilt tests
