#!/usr/bin/env bash
# Fetches the frameworks' own test suites for tests/conformance: langchain-core ships its tests
# only in its source distribution, so the installed version's sdist is downloaded from the
# package index once (into .accel/conformance, git-ignored) and unpacked.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
dest=.accel/conformance
version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('langchain-core'))")
if [ ! -d "$dest/langchain_core-$version/tests/unit_tests" ]; then
    echo "[setup] fetching langchain-core $version's own tests (its source distribution)"
    mkdir -p "$dest"
    .venv/bin/python -m pip download -q --no-deps --no-binary :all: "langchain-core==$version" -d "$dest"
    tar xzf "$dest/langchain_core-$version.tar.gz" -C "$dest"
fi
