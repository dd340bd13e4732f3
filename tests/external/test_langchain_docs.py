"""LangChain apps transcribed from LangChain's own documentation (tests/external/apps/lc_*.py),
stock vs `accel.wrap`: the same outputs and engine requests, one at a time and with `batch`;
and `explain()` shows the retrieval and the model lowered, so no test passes by running
everything as-is."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import accel

from .apps import (
    lc_cross_encoder_reranker,
    lc_custom_retriever,
    lc_llm_chain_migration,
    lc_multi_query,
    lc_multi_query_custom_prompt,
    lc_pgvector,
    lc_qa_sources,
    lc_rag_builtin_chains,
    lc_rag_custom_prompt,
    lc_rag_tutorial,
    lc_vllm_openai,
)
from .fidelity import assert_same_requests, compare_langchain, record

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def collection() -> str:
    return f"ext_{uuid.uuid4().hex[:8]}"


def lowered(explained: str, *needles: str) -> None:
    """Each needle is on a `[lowered]` component line of `explain()`."""
    lines = [line for line in explained.splitlines() if "[lowered]" in line]
    for needle in needles:
        assert any(needle in line for line in lines), (needle, explained)


@pytest.fixture(scope="module")
def tutorial_store(pydoc_files, pg_dsn, minilm_path):
    return lc_rag_tutorial.index(pydoc_files, lc_rag_tutorial.sqlalchemy_url(pg_dsn), collection(), minilm_path)


@pytest.fixture(scope="module")
def chat(base_url, model_name):
    return lc_rag_tutorial.chat_model(base_url, model_name)


def test_rag_tutorial_preview_chain(tutorial_store, chat, llm_proxy, questions) -> None:
    chain = lc_rag_tutorial.build(tutorial_store, chat)
    fast = accel.wrap(chain)
    lowered(fast.explain(), "Embed + Search", "Decode on", "prompt parts")
    runs = compare_langchain(chain, fast, questions, llm_proxy)
    assert all(isinstance(o, str) for o in runs[0].outputs)
    assert len(runs[0].llm) == len(questions) and len(runs[0].searched) == len(questions)



def test_rag_tutorial_streamed(tutorial_store, chat, llm_proxy, questions) -> None:
    """The walkthrough streams the same chain: `for chunk in rag_chain.stream(...): print(chunk, end="")`."""
    chain = lc_rag_tutorial.build(tutorial_store, chat)
    fast = accel.wrap(chain)
    stock = record(lambda: [list(chain.stream(q)) for q in questions], llm_proxy)
    ours = record(lambda: [list(fast.stream(q)) for q in questions], llm_proxy)
    assert ["".join(chunks) for chunks in ours.outputs] == ["".join(chunks) for chunks in stock.outputs]
    assert all(all(isinstance(c, str) for c in chunks) for chunks in ours.outputs)
    assert_same_requests(stock, ours)

def test_rag_tutorial_custom_prompt(tutorial_store, chat, llm_proxy, questions) -> None:
    chain = lc_rag_custom_prompt.build(tutorial_store.as_retriever(), chat)
    fast = accel.wrap(chain)
    lowered(fast.explain(), "Embed + Search", "Decode on", "prompt parts")
    compare_langchain(chain, fast, questions, llm_proxy)


def test_custom_retriever(chat, llm_proxy) -> None:
    """The how-to's sync-only retriever in the custom-prompt chain: stock's outputs and requests
    with `invoke` and `batch`, and with `ainvoke`s gathered on one loop (the retriever in
    accel's pool there, tests/adapters/langchain/test_runnable_semantics.py)."""
    chain = lc_custom_retriever.build(chat)
    fast = accel.wrap(chain)
    lowered(fast.explain(), "Decode on", "prompt parts")
    queries = lc_custom_retriever.QUERIES
    compare_langchain(chain, fast, queries, llm_proxy)

    async def gathered(app):
        return await asyncio.gather(*(app.ainvoke(q) for q in queries))

    stock = record(lambda: asyncio.run(gathered(chain)), llm_proxy)
    ours = record(lambda: asyncio.run(gathered(fast)), llm_proxy)
    assert ours.outputs == stock.outputs
    assert_same_requests(stock, ours, distinct=True)


def test_rag_tutorial_builtin_chains(tutorial_store, chat, llm_proxy, questions) -> None:
    chain = lc_rag_builtin_chains.build(tutorial_store.as_retriever(), chat)
    fast = accel.wrap(chain)
    lowered(fast.explain(), "Embed + Search", "Decode on")
    inputs = [{"input": q} for q in questions]
    runs = compare_langchain(chain, fast, inputs, llm_proxy)
    assert all(set(o) == {"input", "context", "answer"} for o in runs[0].outputs)



def test_qa_sources_lcel_chain(tutorial_store, chat, llm_proxy, questions) -> None:
    chain = lc_qa_sources.build(tutorial_store.as_retriever(), chat)
    fast = accel.wrap(chain)
    lowered(fast.explain(), "Embed + Search", "Decode on", "prompt parts")
    runs = compare_langchain(chain, fast, [{"input": q} for q in questions], llm_proxy)
    assert all(set(o) == {"input", "context", "answer"} and len(o["context"]) == 4 for o in runs[0].outputs)

@pytest.fixture(scope="module")
def multi_query_db(pydoc_files, pg_dsn, minilm_path):
    return lc_multi_query.vector_db(pydoc_files, lc_rag_tutorial.sqlalchemy_url(pg_dsn), collection(), minilm_path)


def test_multi_query_retriever_simple_usage(multi_query_db, base_url, model_name, llm_proxy, questions) -> None:
    retriever = lc_multi_query.build(multi_query_db, base_url, model_name)
    fast = accel.wrap(retriever)
    lowered(fast.explain(), "generated queries -> Embed + Search", "Decode on")
    runs = compare_langchain(retriever, fast, questions, llm_proxy)
    assert len(runs[0].llm) == len(questions) and runs[0].searched


def test_multi_query_retriever_own_prompt_and_parser(multi_query_db, base_url, model_name, llm_proxy, questions) -> None:
    retriever = lc_multi_query_custom_prompt.build(multi_query_db, base_url, model_name)
    fast = accel.wrap(retriever)
    lowered(fast.explain(), "generated queries -> Embed + Search", "Decode on")
    runs = compare_langchain(retriever, fast, questions, llm_proxy)
    assert len(runs[0].llm) == len(questions)


def test_cross_encoder_reranker(pydoc_files, pg_dsn, minilm_path, reranker_dir, llm_proxy, questions) -> None:
    base = lc_cross_encoder_reranker.base_retriever(pydoc_files, lc_rag_tutorial.sqlalchemy_url(pg_dsn), collection(), minilm_path)
    retriever = lc_cross_encoder_reranker.build(base, reranker_dir)
    fast = accel.wrap(retriever)
    lowered(fast.explain(), "Embed + Search", "Rerank top_n=3")
    runs = compare_langchain(retriever, fast, questions, llm_proxy)
    assert all(len(docs) == 3 for docs in runs[0].outputs)
    assert len(runs[0].scored) == 20 * len(questions)


PGVECTOR_QUERIES = ["kitty", "ducks", "cats"]  # the page's own queries


@pytest.fixture(scope="module")
def pgvector_store(pg_dsn, minilm_path):
    return lc_pgvector.vector_store(lc_rag_tutorial.sqlalchemy_url(pg_dsn), collection(), minilm_path)


@pytest.mark.parametrize("name", sorted(lc_pgvector.FILTERS))
def test_pgvector_filtered_search(pgvector_store, llm_proxy, name) -> None:
    retriever = lc_pgvector.filtered_retriever(pgvector_store, name)
    fast = accel.wrap(retriever)
    lowered(fast.explain(), "Embed + Search")
    runs = compare_langchain(retriever, fast, PGVECTOR_QUERIES, llm_proxy)
    ids = {doc.metadata["id"] for docs in runs[0].outputs for doc in docs}
    assert ids and ids <= {1, 2, 5, 9}
    assert all(q[2] == lc_pgvector.FILTERS[name] for q in runs[0].searched)


def test_pgvector_mmr_retriever_runs_as_is(pgvector_store, llm_proxy) -> None:
    retriever = lc_pgvector.mmr_retriever(pgvector_store)
    fast = accel.wrap(retriever)
    explained = fast.explain()
    assert "[opaque ] VectorStoreRetriever: search_type='mmr'" in explained, explained
    runs = compare_langchain(retriever, fast, PGVECTOR_QUERIES, llm_proxy)
    assert all(len(docs) == 1 for docs in runs[0].outputs)


def test_pgvector_sync_store_async_entry_points_fail_as_stock(pgvector_store) -> None:
    """A PGVector store built as the docs build it (sync `connection` string, no `async_mode`)
    cannot serve LangChain's async entry points: stock `ainvoke`/`abatch` raise AssertionError,
    and so does the wrapped retriever (issue 26: it answered them on accel's own pgvector
    engine, and failed only when Postgres was down); sync calls are lowered as before."""
    retriever = lc_pgvector.filtered_retriever(pgvector_store, "in")
    fast = accel.wrap(retriever)
    for app in (retriever, fast):
        with pytest.raises(AssertionError):
            asyncio.run(app.ainvoke("kitty"))
        with pytest.raises(AssertionError):
            asyncio.run(app.abatch(PGVECTOR_QUERIES))
    assert fast.invoke("kitty") == retriever.invoke("kitty")
    assert "stock runs: PGVector" in fast.explain()


VLLM_PAGE_QUESTIONS = [  # the page's own prompts
    "Rome is",
    "What is the capital of France ?",
    "Who was the US president in the year the first Pokemon game was released?",
]


def test_vllm_openai_completion_client(base_url, model_name, llm_proxy) -> None:
    llm = lc_vllm_openai.completion_llm(base_url, model_name)
    fast = accel.wrap(llm)
    lowered(fast.explain(), "Decode on")
    runs = compare_langchain(llm, fast, VLLM_PAGE_QUESTIONS, llm_proxy)
    assert all('"stop": ["."]' in body for body in runs[0].llm)


def test_vllm_page_legacy_llm_chain_runs_as_is(base_url, model_name, llm_proxy) -> None:
    chain = lc_vllm_openai.llm_chain(lc_vllm_openai.completion_llm(base_url, model_name))
    fast = accel.wrap(chain)
    assert "[opaque ] LLMChain" in fast.explain()  # a legacy Chain: accel lowers LCEL, not LLMChain
    compare_langchain(chain, fast, [{"question": q} for q in VLLM_PAGE_QUESTIONS], llm_proxy)


JOKES = [{"adjective": a} for a in ("funny", "short", "dry", "silly")]


def test_llm_chain_migration_lcel(base_url, model_name, llm_proxy) -> None:
    for chain in (lc_llm_chain_migration.lcel(base_url, model_name), lc_llm_chain_migration.lcel_outer(base_url, model_name)):
        fast = accel.wrap(chain)
        lowered(fast.explain(), "Decode on", "prompt parts")
        compare_langchain(chain, fast, JOKES, llm_proxy)


def test_llm_chain_migration_legacy_runs_as_is(base_url, model_name, llm_proxy) -> None:
    chain = lc_llm_chain_migration.legacy(base_url, model_name)
    fast = accel.wrap(chain)
    assert "[opaque ] LLMChain" in fast.explain()
    compare_langchain(chain, fast, JOKES, llm_proxy)
