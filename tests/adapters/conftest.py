"""Real engines shared by the adapter tests (LangChain and LlamaIndex), started once per session.

- `pg_dsn`: the adapters' own pgserver PostgreSQL + pgvector (from tests/conftest.py);
- `vllm_server` (tests/conftest.py): the session's one vLLM server on the tiny offline Llama;
- `llm_proxy`: a recording reverse proxy in front of it; point both the stock app and accel
  at `llm_proxy.url + "/v1"` and compare `llm_proxy.recorder.take()`;
- `minilm_path` / `reranker_dir`: the packaged MiniLM embedder and the offline cross-encoder;
- `doomed_postgres`: `(dsn, data_dir)` of a Postgres of one test's own, for it to stop.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accel.testing.proxy import RecordingProxy
from accel.engines.embeddings import packaged_minilm_path
from accel.engines.llm.server import ServerHandle
from tests.offline_models import suite_reranker
from accel.engines.vectordb import start_local_postgres, stop_local_postgres


@pytest.fixture(scope="session")
def pg_dsn(postgres_factory: Callable[[str], str]) -> str:
    return postgres_factory("accel-pg-")


@pytest.fixture(scope="session")
def llm_proxy(vllm_server: ServerHandle) -> Iterator[RecordingProxy]:
    with RecordingProxy(vllm_server.base_url.removesuffix("/v1")) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    return packaged_minilm_path()


@pytest.fixture(scope="session")
def reranker_dir() -> Path:
    return Path(suite_reranker())


@pytest.fixture()
def doomed_postgres() -> Iterator[tuple[str, Path]]:
    """A Postgres of this test's own, to stop mid-test (not pytest's tmp_path: as root, postgres
    runs as the `pgserver` user, which must traverse the directory)."""
    root = Path(tempfile.mkdtemp(prefix="accel-down-"))
    root.chmod(0o755)
    try:
        yield start_local_postgres(root / "data"), root / "data"
    finally:
        stop_local_postgres(root / "data")
        shutil.rmtree(root, ignore_errors=True)
