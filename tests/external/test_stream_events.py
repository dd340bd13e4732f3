"""`astream_events(version="v2")` of every LangChain app in tests/external/apps, stock vs
`accel.wrap`: the same events, run by run, and the same engine requests.

What is compared, per run (events grouped by `run_id`, runs nested by `parent_ids`): its name,
the kinds of its events in order (the stream events collapsed to one `*_stream` entry), and
what its stream events carry, concatenated (message chunks by their text, dict chunks merged
key by key, documents by id and text). What is normalised, and why:
- run ids, timestamps and `metadata` differ by nature (every run has fresh ids; LangSmith
  metadata such as `ls_model_name` is compared by the run-tree tests);
- siblings are compared as a multiset, and merged dict chunks by key: the branches of a
  `RunnableParallel` run side by side, so the order of their events varies between two stock
  runs too;
- the number of stream events of a run is compared exactly only where no model paces it: a
  model's stream events follow vLLM's server-sent events, and vLLM coalesces tokens into one
  event when the client lags, for stock and accel alike. A run is model-paced if it is a
  model, holds one, or has as many stream events as a model of the same stream (a parser
  after it); there the concatenated text and the presence of stream events are compared.
The first and last events, and the engine requests (`fidelity.record`), are compared too.

While `astream_events`' handler listens, a wrapped chain runs the stock chain with its engine
calls captured (docs/design.md, "stated limits"); on the lowered path these tests fail (the
RAG chains' parallel step and parser emitted no stream events).
"""

from __future__ import annotations

import asyncio
import functools
import operator
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import accel

from .apps import (
    lc_cross_encoder_reranker,
    lc_llm_chain_migration,
    lc_message_history,
    lc_multi_query,
    lc_multi_query_custom_prompt,
    lc_pgvector,
    lc_qa_sources,
    lc_rag_builtin_chains,
    lc_rag_custom_prompt,
    lc_rag_tutorial,
    lc_vllm_openai,
)
from .fidelity import assert_same_requests, record

pytestmark = [pytest.mark.engines, pytest.mark.slow]

QUESTION = "How do I decode a JSON document?"


def plain(value: Any) -> Any:
    """A run-independent view of an event's payload."""
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage
    from langchain_core.outputs import GenerationChunk
    from langchain_core.prompt_values import PromptValue

    if isinstance(value, BaseMessage):
        return (value.type, value.content)
    if isinstance(value, GenerationChunk):
        return value.text
    if isinstance(value, PromptValue):
        return [plain(m) for m in value.to_messages()]
    if isinstance(value, Document):
        return (value.id, value.page_content)
    if isinstance(value, dict):  # keys in order: a parallel step's keys arrive as its branches finish
        return {k: plain(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def outline(events: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """(the normalised run trees, each run's number of stream events) of one event stream."""
    runs: dict[str, dict[str, Any]] = {}
    for event in events:
        run = runs.setdefault(event["run_id"], {"name": event["name"], "kinds": [], "chunks": [],
                                                 "parent": (event["parent_ids"] or [None])[-1], "children": []})
        kind = event["event"]
        if kind.endswith("_stream"):
            run["chunks"].append(event["data"]["chunk"])
        if not run["kinds"] or run["kinds"][-1] != kind:
            run["kinds"].append(kind)
    for run_id, run in runs.items():
        if run["parent"] in runs:
            runs[run["parent"]]["children"].append(run_id)
    def model(run: dict[str, Any]) -> bool:
        return run["kinds"][0] in ("on_chat_model_start", "on_llm_start")

    def holds_model(run: dict[str, Any]) -> bool:
        return model(run) or any(holds_model(runs[c]) for c in run["children"])

    # a model's stream events follow the server's events; so do those of the runs around it
    # and of the steps after it (a parser: one chunk per model chunk)
    paced = {len(r["chunks"]) for r in runs.values() if model(r)}

    def tree(run_id: str) -> tuple[Any, ...]:
        run = runs[run_id]
        text = repr(plain(functools.reduce(operator.add, run["chunks"]))) if run["chunks"] else None
        return (run["name"], tuple(run["kinds"]), text, tuple(sorted((tree(c) for c in run["children"]), key=repr)))

    def counts(run_id: str) -> list[Any]:
        run = runs[run_id]
        n = len(run["chunks"])
        model_paced = n > 1 and (n in paced or holds_model(run))
        return [run["name"], "model-paced" if model_paced else n, sorted(counts(c) for c in run["children"])]

    roots = [run_id for run_id, run in runs.items() if run["parent"] not in runs]
    return [tree(r) for r in roots], [counts(r) for r in roots]


def difference(mine: Any, theirs: Any) -> str:
    """The first run whose outline differs (wrapped vs stock), for the assertion message."""
    if len(mine) != len(theirs):
        return f"runs {[t[0] for t in mine]} vs stock's {[t[0] for t in theirs]}"
    for a, b in zip(mine, theirs, strict=True):
        if a[:3] != b[:3]:
            return f"wrapped {a[:3]!r}\nstock   {b[:3]!r}"
        if a != b:
            return f"in {a[0]}: " + difference(a[3], b[3])
    return ""


def events_of(app: Any, x: Any, config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    async def collect() -> list[dict[str, Any]]:
        return [event async for event in app.astream_events(x, config, version="v2")]

    return asyncio.run(collect())


def assert_same_events(chain: Any, fast: Any, x: Any, proxy: Any, config: Callable[[], dict[str, Any] | None] = lambda: None,
                       *, lowered: bool = True) -> None:
    """The same normalised events (`outline`) and the same engine requests. The wrapped app is
    lowered (its `invoke` runs the p-graph) unless `lowered` says it runs as-is."""
    assert fast.lowered is lowered, fast.explain()
    stock = record(lambda: [events_of(chain, x, config())], proxy)
    ours = record(lambda: [events_of(fast, x, config())], proxy)
    [stock_events], [fast_events] = stock.outputs, ours.outputs
    (stock_trees, stock_counts), (fast_trees, fast_counts) = outline(stock_events), outline(fast_events)
    assert fast_trees == stock_trees, difference(fast_trees, stock_trees)
    assert fast_counts == stock_counts
    assert fast_events[0]["event"] == stock_events[0]["event"] and fast_events[-1]["event"] == stock_events[-1]["event"]
    assert_same_requests(stock, ours)


def collection() -> str:
    return f"ev_{uuid.uuid4().hex[:8]}"


def async_twin(store: Any, pg_dsn: str) -> Any:
    """The store's collection behind an `async_mode=True` PGVector: `astream_events` is async,
    and the sync store the pages build refuses LangChain's async entry points (stock raises
    AssertionError; test_langchain_docs.py keeps that divergence visible)."""
    from langchain_postgres import PGVector

    return PGVector(embeddings=store.embeddings, collection_name=store.collection_name,
                    connection=lc_rag_tutorial.sqlalchemy_url(pg_dsn), use_jsonb=True, async_mode=True)


@pytest.fixture(scope="module")
def tutorial_store(pydoc_files, pg_dsn, minilm_path):
    store = lc_rag_tutorial.index(pydoc_files, lc_rag_tutorial.sqlalchemy_url(pg_dsn), collection(), minilm_path)
    return async_twin(store, pg_dsn)


@pytest.fixture(scope="module")
def multi_query_db(pydoc_files, pg_dsn, minilm_path):
    store = lc_multi_query.vector_db(pydoc_files, lc_rag_tutorial.sqlalchemy_url(pg_dsn), collection(), minilm_path)
    return async_twin(store, pg_dsn)


@pytest.fixture(scope="module")
def pgvector_store(pg_dsn, minilm_path):
    return async_twin(lc_pgvector.vector_store(lc_rag_tutorial.sqlalchemy_url(pg_dsn), collection(), minilm_path), pg_dsn)


def rag_apps(store: Any, chat: Any) -> dict[str, tuple[Any, Any]]:
    """The RAG chains over one store: name -> (chain, its input)."""
    retriever = store.as_retriever()
    return {"rag_tutorial": (lc_rag_tutorial.build(store, chat), QUESTION),
            "rag_custom_prompt": (lc_rag_custom_prompt.build(retriever, chat), QUESTION),
            "rag_builtin_chains": (lc_rag_builtin_chains.build(retriever, chat), {"input": QUESTION}),
            "qa_sources": (lc_qa_sources.build(retriever, chat), {"input": QUESTION})}


@pytest.mark.parametrize("name", ["rag_tutorial", "rag_custom_prompt", "rag_builtin_chains", "qa_sources"])
def test_rag_chains(tutorial_store, chat, llm_proxy, name) -> None:
    chain, x = rag_apps(tutorial_store, chat)[name]
    assert_same_events(chain, accel.wrap(chain), x, llm_proxy)


@pytest.mark.parametrize("app", [lc_multi_query, lc_multi_query_custom_prompt], ids=["simple_usage", "own_prompt_and_parser"])
def test_multi_query_retrievers(multi_query_db, base_url, model_name, llm_proxy, app) -> None:
    retriever = app.build(multi_query_db, base_url, model_name)
    assert_same_events(retriever, accel.wrap(retriever), QUESTION, llm_proxy)


def test_cross_encoder_reranker(pydoc_files, pg_dsn, minilm_path, reranker_dir, llm_proxy) -> None:
    base = lc_cross_encoder_reranker.base_retriever(pydoc_files, lc_rag_tutorial.sqlalchemy_url(pg_dsn), collection(), minilm_path)
    retriever = lc_cross_encoder_reranker.build(async_twin(base.vectorstore, pg_dsn).as_retriever(search_kwargs=base.search_kwargs),
                                                reranker_dir)
    assert_same_events(retriever, accel.wrap(retriever), QUESTION, llm_proxy)


@pytest.mark.parametrize("name", sorted(lc_pgvector.FILTERS))
def test_pgvector_filtered_search(pgvector_store, llm_proxy, name) -> None:
    retriever = lc_pgvector.filtered_retriever(pgvector_store, name)
    assert_same_events(retriever, accel.wrap(retriever), "kitty", llm_proxy)


def test_pgvector_mmr_retriever_runs_as_is(pgvector_store, llm_proxy) -> None:
    retriever = lc_pgvector.mmr_retriever(pgvector_store)
    assert_same_events(retriever, accel.wrap(retriever), "kitty", llm_proxy, lowered=False)


def test_vllm_openai_completion_client(base_url, model_name, llm_proxy) -> None:
    llm = lc_vllm_openai.completion_llm(base_url, model_name)
    assert_same_events(llm, accel.wrap(llm), "Rome is", llm_proxy)


def test_vllm_page_legacy_llm_chain_runs_as_is(base_url, model_name, llm_proxy) -> None:
    chain = lc_vllm_openai.llm_chain(lc_vllm_openai.completion_llm(base_url, model_name))
    assert_same_events(chain, accel.wrap(chain), {"question": "Rome is"}, llm_proxy, lowered=False)


@pytest.mark.parametrize("build", [lc_llm_chain_migration.lcel, lc_llm_chain_migration.lcel_outer], ids=["lcel", "lcel_outer"])
def test_llm_chain_migration(base_url, model_name, llm_proxy, build) -> None:
    chain = build(base_url, model_name)
    assert_same_events(chain, accel.wrap(chain), {"adjective": "funny"}, llm_proxy)


def test_llm_chain_migration_legacy_runs_as_is(base_url, model_name, llm_proxy) -> None:
    chain = lc_llm_chain_migration.legacy(base_url, model_name)
    assert_same_events(chain, accel.wrap(chain), {"adjective": "funny"}, llm_proxy, lowered=False)


def test_message_history_runs_as_is(chat, llm_proxy) -> None:
    """Each app its own session (the history is state): both start empty."""
    sessions = iter(["stock", "wrapped"])
    chain, fast = lc_message_history.build(chat), accel.wrap(lc_message_history.build(chat))
    assert_same_events(chain, fast, {"ability": "math", "input": "What does cosine mean?"}, llm_proxy,
                       config=lambda: {"configurable": {"session_id": next(sessions)}}, lowered=False)
