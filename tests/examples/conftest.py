"""A private engine stack for the example apps run stock: embedded Postgres + pgvector, a vLLM server
on the tiny offline Llama (about 2 minutes to start), MiniLM and the offline cross-encoder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("langchain_classic")
pytest.importorskip("llama_index.core")

from accel.benchmarks.private_stack import private_stack  # noqa: E402
from accel.examples.stack import StackConfig  # noqa: E402


@pytest.fixture(scope="session")
def stack() -> Iterator[StackConfig]:
    with private_stack("tiny", max_tokens=12) as config:
        yield config
