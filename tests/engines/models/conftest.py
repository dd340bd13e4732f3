"""Shared fixtures: the real packaged MiniLM embedder and the offline reranker, built once into
a temporary ACCEL_HOME so that tests never touch the user's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.engines.embeddings import SentenceTransformerEmbedder, packaged_minilm_path
from accel.engines.offline.reranker import DEFAULT_DIRNAME, build_reranker
from accel.engines.reranker import CrossEncoderReranker
from accel.engines.profile import chunk_texts, query_texts


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    return packaged_minilm_path()


@pytest.fixture(scope="session")
def accel_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("accel-home")


@pytest.fixture(scope="session")
def reranker_dir(accel_home: Path) -> Path:
    return build_reranker(accel_home / "models" / DEFAULT_DIRNAME)


@pytest.fixture(scope="session")
def texts() -> list[str]:
    """Varied lengths: short queries, 256-token chunks, and a one-word text."""
    return [*query_texts(10), *chunk_texts(4), "json"]


@pytest.fixture(scope="session")
async def embedder():
    async with SentenceTransformerEmbedder() as engine:
        yield engine


@pytest.fixture(scope="session")
async def reranker(reranker_dir: Path):
    async with CrossEncoderReranker(reranker_dir) as engine:
        yield engine
