"""Engines and data for the apps transcribed from the frameworks' own documentation.

The apps (tests/external/apps/) import no accel code: each is a `build(...)` function that
takes only what had to change to run offline here (the LLM endpoint, the local model paths,
the Postgres connection, the documents) and returns the app the documentation builds.

- `llm_proxy`: a recording reverse proxy in front of the session's tiny vLLM server; both the
  stock app and accel talk to it, so their generation requests can be compared;
- `pg_dsn`: this suite's own pgserver PostgreSQL + pgvector;
- `pydoc_files`: the documents the tutorials load from the web or a data folder, replaced by
  the pydoc pages of a few standard-library modules (scrubbed, deterministic), one text file
  per module in one folder (what `SimpleDirectoryReader("data")` / `TextLoader` read);
- `minilm_path` / `reranker_dir`: the packaged MiniLM embedder and the two-layer offline cross-encoder
  standing in for the hub models the pages name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain_classic")
pytest.importorskip("llama_index.core")

from accel.testing.proxy import RecordingProxy  # noqa: E402
from accel.engines.embeddings import packaged_minilm_path  # noqa: E402
from accel.engines.llm.server import ServerHandle  # noqa: E402
from accel.engines.offline.corpus import stdlib_docs  # noqa: E402
from tests.offline_models import suite_reranker  # noqa: E402

MODULES = ("json", "heapq", "textwrap", "functools")
MAX_CHARS = 6000  # the first part of each pydoc page: a few chunks per module


@pytest.fixture(scope="session")
def llm_proxy(vllm_server: ServerHandle) -> Iterator[RecordingProxy]:
    with RecordingProxy(vllm_server.base_url.removesuffix("/v1")) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def base_url(llm_proxy: RecordingProxy) -> str:
    """The OpenAI-compatible endpoint the apps' LLM clients are pointed at."""
    return llm_proxy.url + "/v1"


@pytest.fixture(scope="session")
def model_name(vllm_server: ServerHandle) -> str:
    return vllm_server.model


@pytest.fixture(scope="session")
def pg_dsn(postgres_factory: Callable[[str], str]) -> str:
    return postgres_factory("accel-ext-pg-")


@pytest.fixture(scope="session")
def minilm_path() -> str:
    return str(packaged_minilm_path())


@pytest.fixture(scope="session")
def reranker_dir() -> str:
    return suite_reranker()


@pytest.fixture(scope="session")
def pydoc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pydoc-data")
    for doc in stdlib_docs(MODULES):
        (folder / f"{doc.id.removeprefix('stdlib:')}.txt").write_text(doc.text[:MAX_CHARS])
    return folder


@pytest.fixture(scope="session")
def pydoc_files(pydoc_dir: Path) -> list[str]:
    return [str(p) for p in sorted(pydoc_dir.glob("*.txt"))]


# Three questions: each app runs them one by one and together, stock and wrapped (a fourth, on
# functools.partial, added a quarter to these suites' time and no case the three lack).
QUESTIONS = [
    "How do I decode a JSON document?",
    "What does heapq.heappush do?",
    "How can text be wrapped to a width?",
]


@pytest.fixture
def questions() -> list[str]:
    return list(QUESTIONS)


@pytest.fixture
def llama_settings() -> Iterator[None]:
    """The LlamaIndex pages configure the global `Settings`; restore them after each app."""
    from llama_index.core import Settings

    saved = {name: value for name, value in vars(Settings).items() if name.startswith("_") and not name.startswith("__")}
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(Settings, name, value)


@pytest.fixture(scope="module")
def store(pydoc_files, pg_dsn, minilm_path):
    """The LangChain RAG tutorial's PGVector store over the pydoc files (a fresh collection per module)."""
    import uuid

    from .apps import lc_rag_tutorial

    return lc_rag_tutorial.index(pydoc_files, lc_rag_tutorial.sqlalchemy_url(pg_dsn), f"lg_{uuid.uuid4().hex[:8]}", minilm_path)


@pytest.fixture(scope="module")
def chat(base_url, model_name):
    """`ChatOpenAI` on the test server, 12 tokens (modules may define their own)."""
    from .apps import lc_rag_tutorial

    return lc_rag_tutorial.chat_model(base_url, model_name, max_tokens=12)

