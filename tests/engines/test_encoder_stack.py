"""`accel up --encoders server --json` / `accel doctor` / `accel down` from .venv/bin/accel: a vLLM
pooling server for the embedder is started and recorded, a rerank server named by
ACCEL_RERANK_BASE_URL is recorded and left alone, the doctor checks both with a real request;
`down` stops what `up` started only. The LLM server and Postgres are
named by URL, so only the encoders start here.

The rerank server is the session's (`rerank_url`, tests/conftest.py; ACCEL_TEST_RERANK_URL reuses
one already running): `down` must leave it serving, which the test checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from accel.engines.encoder_servers import EMBED_SERVED_NAME, RERANK_SERVED_NAME
from accel.engines.llm.server import ServerHandle
from tests.offline_models import suite_reranker
from accel.engines.stack import pid_alive

ACCEL = str(Path(sys.executable).with_name("accel"))
pytestmark = [pytest.mark.engines, pytest.mark.slow]


def test_up_starts_the_embedding_server_and_records_a_named_rerank_server(
        vllm_server: ServerHandle, tiny_model: Path, postgres_factory: Callable[[str], str], rerank_url: str) -> None:
    env = dict(os.environ, ACCEL_HOME=tempfile.mkdtemp(prefix="accel-enc-"), ACCEL_LLM_MODEL=str(tiny_model),
               ACCEL_RERANK_MODEL=suite_reranker(), ACCEL_OPENAI_BASE_URL=vllm_server.base_url,
               ACCEL_PG_DSN=postgres_factory("accel-enc-pg-"), ACCEL_RERANK_BASE_URL=rerank_url, VLLM_CPU_KVCACHE_SPACE="1",
               ACCEL_VLLM_ARGS="--enforce-eager")  # the start is what is tested, not its speed
    env.pop("ACCEL_EMBED_BASE_URL", None)
    up = subprocess.run([ACCEL, "up", "--encoders", "server", "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert up.returncode == 0, up.stderr[-3000:]
    info = json.loads(up.stdout)
    try:
        assert info["embed_model_name"] == EMBED_SERVED_NAME and info["embed_server_pid"]
        assert (info["rerank_base_url"], info["rerank_model_name"], info["rerank_server_pid"]) == \
            (rerank_url, RERANK_SERVED_NAME, None)
        answer = httpx.post(f"{info['embed_base_url']}/embeddings", timeout=60,
                            json={"model": info["embed_model_name"], "input": ["hello world"]}).json()
        assert len(answer["data"][0]["embedding"]) == 384
        again = subprocess.run([ACCEL, "up", "--json"], env=env, capture_output=True, text=True, timeout=600)
        assert json.loads(again.stdout) == info  # recorded: a plain `up` reports the same stack
        doctor = subprocess.run([ACCEL, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=600)
        engines = json.loads(doctor.stdout)["engines"]
        assert engines["embed-server"]["ok"] and engines["rerank-server"]["ok"], engines
    finally:
        down = subprocess.run([ACCEL, "down"], env=env, capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stderr[-3000:]
    assert "vllm-embed-server" in down.stdout and "rerank" not in down.stdout
    assert not pid_alive(info["embed_server_pid"])
    scored = httpx.post(f"{rerank_url.removesuffix('/v1')}/score", timeout=60,
                        json={"model": RERANK_SERVED_NAME, "text_1": "q", "text_2": ["d"]})
    assert scored.status_code == 200  # a server named by URL is never stopped
