"""LlamaIndex apps built from standard classes on the real engines: MiniLM embeddings, a
pgserver PostgreSQL (PGVectorStore with the app's own table) or the in-memory store, and
OpenAILike on the vLLM server behind the recording proxy, decoding greedily."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("llama_index.vector_stores.postgres")

from accel.testing.proxy import RecordingProxy  # noqa: E402
from accel.engines.llm.server import ServerHandle  # noqa: E402

CONTEXT_WINDOW = 2048  # the server's --max-model-len (tests/adapters/conftest.py)

SUBJECTS = ["The heron", "Our kettle", "The old bridge", "A violin", "The compiler", "Fresh bread", "The river"]
ACTIONS = ["sleeps through", "hums during", "glows in", "waits out", "remembers"]
TIMES = ["the winter storm", "a quiet morning", "the long night", "the market day"]
QUESTIONS = ["Which animal sleeps in the storm?", "music at dawn", "a bridge over water at night", "baking bread"]


def corpus() -> list[tuple[str, str, dict[str, Any]]]:
    rows = []
    for s, subject in enumerate(SUBJECTS):
        for a, action in enumerate(ACTIONS):
            n = s * len(ACTIONS) + a
            rows.append((f"node-{n:03d}", f"{subject} {action} {TIMES[n % len(TIMES)]}.", {"n": n}))
    return rows


def text_nodes() -> list[Any]:
    from llama_index.core.schema import TextNode

    return [TextNode(id_=i, text=t, metadata=m) for i, t, m in corpus()]


@pytest.fixture(scope="session")
def embed_model(minilm_path: Path) -> Any:
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(model_name=str(minilm_path), device="cpu")


def make_llm(proxy: RecordingProxy, server: ServerHandle, **overrides: Any) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    options = {"max_tokens": 12, "temperature": 0.0, "context_window": CONTEXT_WINDOW, "is_chat_model": False}
    options.update(overrides)
    return OpenAILike(model=server.model, api_base=proxy.url + "/v1", api_key="EMPTY", **options)


@pytest.fixture(scope="session")
def llm(llm_proxy: RecordingProxy, vllm_server: ServerHandle) -> Any:
    return make_llm(llm_proxy, vllm_server)


@pytest.fixture(scope="session")
def pg_index(pg_dsn: str, embed_model: Any) -> Any:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.vector_stores.postgres import PGVectorStore

    store = PGVectorStore.from_params(
        connection_string=pg_dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        async_connection_string=pg_dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        table_name=f"li_{uuid.uuid4().hex[:8]}",
        embed_dim=384,
    )
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(text_nodes(), storage_context=storage, embed_model=embed_model)


def fresh_pg_index(pg_index: Any, embed_model: Any) -> Any:
    """`pg_index`'s table behind a new PGVectorStore: its asyncpg engine binds to the first
    event loop that uses it, so a test running its own loop needs a store of its own."""
    from llama_index.core import VectorStoreIndex
    from llama_index.vector_stores.postgres import PGVectorStore

    old = pg_index.vector_store
    store = PGVectorStore.from_params(connection_string=old.connection_string,
                                      async_connection_string=old.async_connection_string,
                                      table_name=old.table_name, embed_dim=384)
    return VectorStoreIndex.from_vector_store(store, embed_model=embed_model)


@pytest.fixture(scope="session")
def memory_index(embed_model: Any) -> Any:
    from llama_index.core import VectorStoreIndex

    return VectorStoreIndex(text_nodes(), embed_model=embed_model)


def llm_bodies(proxy: RecordingProxy) -> list[dict[str, Any]]:
    """The generation requests the proxy saw, reduced to what the fidelity contract compares
    (prompt or messages, sampling parameters); prefix-cache warm-ups (token-id prompts) and
    tokenizer calls are accel's own and left out."""
    return llm_exchanges(proxy)[0]


def llm_exchanges(proxy: RecordingProxy) -> tuple[list[dict[str, Any]], int]:
    """`llm_bodies`, and how many server-sent events the streamed answers carried: one
    in-progress event each for a client (vLLM puts several tokens in one event when its client
    lags, stock's or ours, so two runs of one stream may split differently; a run's events must
    match its own server's)."""
    keep = ("prompt", "messages", "max_tokens", "temperature", "stop", "seed")
    bodies, sent = [], 0
    for request in proxy.recorder.take():
        body = request.body or {}
        if not request.path.endswith("completions") or not isinstance(body.get("prompt", ""), str):
            continue
        bodies.append({k: body[k] for k in keep if k in body})
        if body.get("stream"):
            sent += sum(line.startswith(b"data: ") and line != b"data: [DONE]" for line in bytes(request.response).splitlines())
    return sorted(bodies, key=repr), sent


def in_progress_runs(events: list[str]) -> tuple[list[str], int]:
    """The event names with each run of in-progress events (a stream's chunks) as one, and how
    many in-progress events there were."""
    kept: list[str] = []
    for name in events:
        if not (name.endswith("InProgressEvent") and kept and kept[-1] == name):
            kept.append(name)
    return kept, sum(name.endswith("InProgressEvent") for name in events)


class Recorder:
    """Event names (`events`), and in dispatch order (`log`) every event and every span
    entered ("enter", id, parent id), exited ("exit", id) or dropped ("drop", id)."""

    def __init__(self) -> None:
        from llama_index.core.instrumentation.event_handlers import BaseEventHandler
        from llama_index.core.instrumentation.span import SimpleSpan
        from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

        events: list[str] = []
        log: list[tuple[Any, ...]] = []

        class Handler(BaseEventHandler):
            @classmethod
            def class_name(cls) -> str:
                return "AccelTestHandler"

            def handle(self, event: Any, **kwargs: Any) -> None:
                events.append(event.class_name())
                log.append(("event", event))

        class Spans(BaseSpanHandler[SimpleSpan]):
            @classmethod
            def class_name(cls) -> str:
                return "AccelTestSpans"

            def new_span(self, id_: str, bound_args: Any, instance: Any = None, parent_span_id: str | None = None,
                         tags: Any = None, **kwargs: Any) -> SimpleSpan:
                log.append(("enter", id_, parent_span_id))
                return SimpleSpan(id_=id_, parent_id=parent_span_id)

            def prepare_to_exit_span(self, id_: str, bound_args: Any, instance: Any = None, result: Any = None,
                                     **kwargs: Any) -> SimpleSpan | None:
                log.append(("exit", id_))
                return self.open_spans.get(id_)

            def prepare_to_drop_span(self, id_: str, bound_args: Any, instance: Any = None, err: Any = None,
                                     **kwargs: Any) -> SimpleSpan | None:
                log.append(("drop", id_))
                return self.open_spans.get(id_)

        self.events = events
        self.log = log
        self.handler = Handler()
        self.spans = Spans()

    def take(self) -> list[str]:
        """The event names seen since the last take."""
        taken = list(self.events)
        self.events.clear()
        return taken

    def take_log(self) -> list[tuple[Any, ...]]:
        taken = list(self.log)
        self.log.clear()
        self.events.clear()
        return taken


@pytest.fixture
def recorder():
    import llama_index.core.instrumentation as instrument

    root = instrument.get_dispatcher()
    recorder = Recorder()
    root.add_event_handler(recorder.handler)
    root.add_span_handler(recorder.spans)
    try:
        yield recorder
    finally:
        root.event_handlers.remove(recorder.handler)
        root.span_handlers.remove(recorder.spans)


@pytest.fixture(autouse=True)
def p_graphs_stay_plain():
    """After each test, every LlamaIndex template the shared session holds was lowered plain:
    no scheduling decision in its p-graph (the passes own those)."""
    yield
    from accel.session import _sessions

    from ..plain_graphs import assert_plain

    for session in list(_sessions.values()):
        cache = session._templates
        if cache is not None:
            assert_plain(t for t in list(cache._templates.values()) if str(t.key[0][0]).startswith("llamaindex"))
