"""The engine stack for the example apps run stock: embedded Postgres + pgvector, the session's shared vLLM
server on the tiny offline Llama, MiniLM and the offline cross-encoder."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_classic")
pytest.importorskip("llama_index.core")

from accel.engines.embeddings import packaged_minilm_path  # noqa: E402
from tests.offline_models import suite_reranker  # noqa: E402
from accel.examples.stack import StackConfig  # noqa: E402


@pytest.fixture(scope="session")
def stack(vllm_server, postgres_factory) -> StackConfig:
    """The session's shared vLLM server (tests/conftest.py) and this suite's own Postgres."""
    return StackConfig(vllm_server.base_url, vllm_server.model, postgres_factory("accel-bench-"),
                       str(packaged_minilm_path()), suite_reranker(), max_tokens=12, context_window=2048)
