"""A private engine stack for one benchmark or test session: its own embedded Postgres and
its own vLLM server on an offline model, stopped on exit.

Private means a clean prefix cache and nobody else's load; the server runs in vLLM's dev mode
so the harness can empty the prefix cache between systems (`/reset_prefix_cache`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from accel.engines.embeddings import packaged_minilm_path
from accel.engines.llm.server import launch_server_sync, stop_pid
from accel.engines.offline.llm import build_llm
from accel.engines.offline.reranker import build_reranker
from accel.engines.vectordb import start_local_postgres, stop_local_postgres
from accel.examples.stack import StackConfig

MAX_MODEL_LEN = {"tiny": 2048, "bench": 4096}


@contextmanager
def private_stack(size: str = "tiny", *, max_tokens: int = 16) -> Iterator[StackConfig]:
    """Postgres + pgvector in a fresh `/tmp/accel-bench-*` directory (world-traversable: as
    root, postgres runs as its own user) and a vLLM server on the offline `size` model."""
    root = Path(tempfile.mkdtemp(prefix="accel-bench-"))
    root.chmod(0o755)
    data_dir = root / "pg"
    pg_started = False
    server_pid = None
    previous = os.environ.get("VLLM_SERVER_DEV_MODE")
    try:
        dsn = start_local_postgres(data_dir)
        pg_started = True
        os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # the launcher passes our environment on
        handle = launch_server_sync(str(build_llm(size)), served_model_name=size, max_model_len=MAX_MODEL_LEN[size],
                                    log_path=root / "vllm.log")
        server_pid = handle.pid
        _restore(previous)
        yield StackConfig(handle.base_url, size, dsn, str(packaged_minilm_path()), str(build_reranker()),
                          max_tokens=max_tokens, context_window=MAX_MODEL_LEN[size])
    finally:
        _restore(previous)
        if server_pid is not None:
            stop_pid(server_pid)
        if pg_started:
            stop_local_postgres(data_dir)
        shutil.rmtree(root, ignore_errors=True)


def _restore(previous: str | None) -> None:
    if previous is None:
        os.environ.pop("VLLM_SERVER_DEV_MODE", None)
    else:
        os.environ["VLLM_SERVER_DEV_MODE"] = previous
