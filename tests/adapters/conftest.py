"""Real engines shared by the adapter tests (LangChain and LlamaIndex), started once per session.

- `pg_dsn`: a pgserver PostgreSQL + pgvector in a fresh `/tmp/accel-pg-*` directory (not
  pytest's tmp_path: as root, postgres runs as the `pgserver` user, which must traverse it);
- `vllm_server`: vLLM's OpenAI-compatible server on the tiny offline Llama (~2 min to start;
  set ACCEL_TEST_VLLM_URL=http://host:port/v1 to reuse one already serving it as "tiny");
- `llm_proxy`: a recording reverse proxy in front of it; point both the stock app and accel
  at `llm_proxy.url + "/v1"` and compare `llm_proxy.recorder.take()`;
- `minilm_path` / `reranker_dir`: the packaged MiniLM embedder and the offline cross-encoder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.adapters.common.proxy import RecordingProxy
from accel.engines.embeddings import packaged_minilm_path
from accel.engines.llm.server import ServerHandle, launch_server_sync, stop_pid
from accel.engines.offline.llm import build_llm
from accel.engines.offline.reranker import build_reranker
from accel.engines.vectordb import start_local_postgres, stop_local_postgres

TINY_MODEL_NAME = "tiny"
MAX_MODEL_LEN = 2048


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    root = Path(tempfile.mkdtemp(prefix="accel-pg-"))
    root.chmod(0o755)
    data_dir = root / "data"
    try:
        yield start_local_postgres(data_dir)
    finally:
        stop_local_postgres(data_dir)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return build_llm("tiny")


@pytest.fixture(scope="session")
def vllm_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    running = os.environ.get("ACCEL_TEST_VLLM_URL")  # reuse a server already up (local iteration)
    if running:
        yield ServerHandle(running.rstrip("/"), TINY_MODEL_NAME, -1, Path("/dev/null"))
        return
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    handle = launch_server_sync(str(tiny_model), served_model_name=TINY_MODEL_NAME, max_model_len=MAX_MODEL_LEN, log_path=log)
    try:
        yield handle
    finally:
        stop_pid(handle.pid)


@pytest.fixture(scope="session")
def llm_proxy(vllm_server: ServerHandle) -> Iterator[RecordingProxy]:
    with RecordingProxy(vllm_server.base_url.removesuffix("/v1")) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    return packaged_minilm_path()


@pytest.fixture(scope="session")
def reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_reranker(tmp_path_factory.mktemp("models") / "rerank-minilm-l6")
