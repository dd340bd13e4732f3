"""Engines shared by the whole test session.

One vLLM OpenAI server on the tiny offline Llama serves every suite that needs one (adapters,
examples, benchmarks): each server holds gigabytes, and a session that started one per folder
ran the 24 GiB machine out of memory. Postgres is light, so each suite asks `postgres_factory`
for its own server and tables never collide across suites.

- `vllm_server`: served as "tiny", 2048-token window, dev mode on (the harness empties the
  prefix cache between systems); ~2 min to start. ACCEL_TEST_VLLM_URL=http://host:port/v1
  reuses a server already serving the tiny model as "tiny" (local iteration).
- `postgres_factory(prefix) -> dsn`: a pgserver PostgreSQL + pgvector in a fresh
  `/tmp/<prefix>*` directory (not pytest's tmp_path: as root, postgres runs as the `pgserver`
  user, which must traverse it), stopped at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accel.engines.llm.server import ServerHandle, launch_server_sync, stop_pid
from accel.engines.offline.llm import build_llm
from accel.engines.vectordb import start_local_postgres, stop_local_postgres

TINY_MODEL_NAME = "tiny"
TINY_MAX_MODEL_LEN = 2048


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return build_llm("tiny")


@pytest.fixture(scope="session")
def vllm_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    running = os.environ.get("ACCEL_TEST_VLLM_URL")
    if running:
        yield ServerHandle(running.rstrip("/"), TINY_MODEL_NAME, -1, Path("/dev/null"))
        return
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    previous = os.environ.get("VLLM_SERVER_DEV_MODE")
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # the launcher passes our environment on
    try:
        handle = launch_server_sync(str(tiny_model), served_model_name=TINY_MODEL_NAME,
                                    max_model_len=TINY_MAX_MODEL_LEN, log_path=log)
    finally:
        if previous is None:
            os.environ.pop("VLLM_SERVER_DEV_MODE", None)
        else:
            os.environ["VLLM_SERVER_DEV_MODE"] = previous
    try:
        yield handle
    finally:
        stop_pid(handle.pid)


@pytest.fixture(scope="session")
def postgres_factory() -> Iterator[Callable[[str], str]]:
    started: list[Path] = []

    def start(prefix: str = "accel-pg-") -> str:
        root = Path(tempfile.mkdtemp(prefix=prefix))
        root.chmod(0o755)
        started.append(root)
        return start_local_postgres(root / "data")

    try:
        yield start
    finally:
        for root in started:
            stop_local_postgres(root / "data")
            shutil.rmtree(root, ignore_errors=True)
