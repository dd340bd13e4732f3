"""A ContextualCompressionRetriever whose compressor accel cannot lower (user code: a custom
`BaseDocumentCompressor`, or `CrossEncoderReranker` over a custom `BaseCrossEncoder`) keeps its
base retriever lowered (Embed + Search) and runs the compressor as stock calls it: same
documents, same engine requests, same callback run tree (the compressor's own runs included)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

import accel
from accel.adapters.langchain.ops import CompressOp
from accel.ir import Kind
from accel.testing.runtrees import Recorder, difference, outline, trees

from .fidelity import assert_same, run

pytestmark = [pytest.mark.engines, pytest.mark.slow]

PROMPT = ChatPromptTemplate.from_messages([("system", "Answer from this context:\n\n{context}"), ("human", "{question}")])


class KeepAndReverse(BaseDocumentCompressor):
    """Keeps the documents sharing a word (4+ letters) with the query, last first. Its work
    runs in a child runnable handed the callbacks (a child run of the retriever's, as stock
    does), and it also invokes a runnable with no config (its run's parent is whatever the
    current config says: stock's retriever sets none of its own)."""

    calls: ClassVar[list[str]] = []

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks: Any = None) -> Sequence[Document]:
        self.calls.append(threading.current_thread().name)
        words = {w.strip("?.,").lower() for w in query.split() if len(w.strip("?.,")) >= 4}
        keep = RunnableLambda(lambda docs: [d for d in docs if words & set(d.page_content.lower().split())], name="keep_matching")
        kept = keep.invoke(list(documents), config={"callbacks": callbacks})
        RunnableLambda(lambda n: n, name="count_kept").invoke(len(kept))
        return tuple(reversed(kept)) or tuple(documents[:1])


def _overlap_encoder():
    from langchain_community.cross_encoders import BaseCrossEncoder

    class OverlapCrossEncoder(BaseCrossEncoder):
        """A user-written cross-encoder: word overlap of query and text (deterministic)."""

        def __init__(self) -> None:
            self.pairs: list[tuple[str, str]] = []

        def score(self, text_pairs: list[tuple[str, str]]) -> list[float]:
            self.pairs += text_pairs
            return [len(set(q.lower().split()) & set(t.lower().split())) / (1 + len(t)) for q, t in text_pairs]

    return OverlapCrossEncoder()


def compression(store: Any, kind: str, **search: Any) -> Any:
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker

    compressor = KeepAndReverse() if kind == "keep" else CrossEncoderReranker(model=_overlap_encoder(), top_n=2)
    return ContextualCompressionRetriever(base_compressor=compressor, base_retriever=store.as_retriever(search_kwargs={"k": 4, **search}))


KINDS = ["keep", "cross-encoder"]


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(doc.page_content for doc in docs)


def in_a_chain(retriever: Any) -> Any:
    return {"context": retriever | format_docs, "question": RunnablePassthrough()} | PROMPT


def same_trace(stock: Any, call: Any) -> Recorder:
    """`call(runnable, config)` on stock and wrapped, each with its own recorder: equal
    outputs, equal run trees. Returns stock's recorder."""
    fast = accel.wrap(stock)
    assert fast.lowered
    stock_runs, fast_runs = Recorder(), Recorder()
    stock_out = call(stock, {"callbacks": [stock_runs], "tags": ["mine"], "metadata": {"user": "u"}})
    fast_out = call(fast, {"callbacks": [fast_runs], "tags": ["mine"], "metadata": {"user": "u"}})
    assert fast_out == stock_out
    assert stock_runs.roots
    assert trees(fast_runs) == trees(stock_runs), difference(trees(fast_runs), trees(stock_runs))
    return stock_runs


@pytest.mark.parametrize("kind", KINDS)
def test_the_base_retriever_is_lowered_and_the_compressor_is_user_code(vectorstore, kind) -> None:
    retriever = compression(vectorstore, kind)
    for fast in (accel.wrap(retriever), accel.wrap(in_a_chain(retriever))):
        assert fast.lowered
        explained = fast.explain()
        assert "runs as-is" not in explained.splitlines()[2]
        assert "Embed + Search" in explained
        assert "compress_documents runs as user code" in explained
        graph = fast.template.graph
        assert {Kind.EMBED, Kind.SEARCH} <= {node.kind for node in graph.nodes()}
        calls = [node for node in graph.nodes() if isinstance(node.op, CompressOp)]
        assert len(calls) == 1 and calls[0].kind == Kind.CALL and calls[0].op.compressor is retriever.base_compressor


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["invoke", "batch"])
def test_documents_and_requests_match_stock(vectorstore, llm_proxy, questions, kind, mode) -> None:
    retriever = compression(vectorstore, kind)
    stock = run(retriever, questions, llm_proxy, mode=mode)
    fast = run(accel.wrap(retriever), questions, llm_proxy, mode=mode)
    assert_same(stock, fast)
    assert len(fast.searched) == len(questions)
    assert all(isinstance(docs, list) and docs for docs in fast.outputs)  # stock's `list(...)`


@pytest.mark.parametrize("kind", KINDS)
def test_ainvoke_matches_stock(async_vectorstore, questions, kind) -> None:
    retriever = compression(async_vectorstore, kind)
    fast = accel.wrap(retriever)

    async def each(runnable: Any) -> list[Any]:
        return [await runnable.ainvoke(q) for q in questions] + [await runnable.abatch(questions)]

    assert asyncio.run(each(fast)) == asyncio.run(each(retriever))


def test_the_compressor_runs_on_the_callers_thread(vectorstore, questions) -> None:
    retriever = compression(vectorstore, "keep")
    KeepAndReverse.calls.clear()
    accel.wrap(retriever).invoke(questions[0])
    assert KeepAndReverse.calls == [threading.current_thread().name]


def test_a_sync_compressor_of_an_async_call_runs_in_accels_pool(async_vectorstore, questions) -> None:
    """Stock's `acompress_documents` hands the sync one to the loop's default executor (as many
    threads as asyncio gives it); a wrapped call runs it, with the same arguments, in accel's
    user-code pool (adapters/langchain/sync_code.py)."""
    retriever = compression(async_vectorstore, "keep")
    KeepAndReverse.calls.clear()
    stock = asyncio.run(retriever.ainvoke(questions[0]))
    fast = asyncio.run(accel.wrap(retriever).ainvoke(questions[0]))
    assert fast == stock
    assert [name.split("_")[0] for name in KeepAndReverse.calls] == ["asyncio", "accel-user"]


def test_no_documents_no_compressor_call(vectorstore, questions) -> None:
    retriever = compression(vectorstore, "keep", filter={"n": -1})
    KeepAndReverse.calls.clear()
    assert accel.wrap(retriever).invoke(questions[0]) == retriever.invoke(questions[0]) == []
    assert KeepAndReverse.calls == []


@pytest.mark.parametrize("kind", KINDS)
def test_run_tree_alone(vectorstore, questions, kind) -> None:
    stock = same_trace(compression(vectorstore, kind), lambda runnable, config: runnable.invoke(questions[1], config=config))
    rows = outline(trees(stock)[0])
    assert rows[:2] == [(0, "ContextualCompressionRetriever", "retriever", ("mine",)),
                        (1, "VectorStoreRetriever", "retriever", ("HuggingFaceEmbeddings", "PGVector", "mine"))]
    if kind == "keep":
        assert (1, "keep_matching", "chain", ("mine",)) in rows  # the compressor's own child run


@pytest.mark.parametrize("kind", KINDS)
def test_run_tree_in_a_chain(vectorstore, questions, kind) -> None:
    stock = same_trace(in_a_chain(compression(vectorstore, kind)), lambda runnable, config: runnable.invoke(questions[2], config=config))
    rows = outline(trees(stock)[0])
    assert (3, "ContextualCompressionRetriever", "retriever", ("mine", "seq:step:1")) in rows
    if kind == "keep":
        assert (4, "keep_matching", "chain", ("mine",)) in rows
        assert (3, "count_kept", "chain", ("mine", "seq:step:1")) in rows  # stock: the current config is the step's


@pytest.mark.parametrize("kind", KINDS)
def test_run_tree_batch(vectorstore, questions, kind) -> None:
    same_trace(in_a_chain(compression(vectorstore, kind)), lambda runnable, config: runnable.batch(questions[:3], config=config))
    same_trace(compression(vectorstore, kind), lambda runnable, config: runnable.batch(questions[:3], config=config))


@pytest.mark.parametrize("kind", KINDS)
def test_run_tree_ainvoke(async_vectorstore, questions, kind) -> None:
    ainvoke = lambda runnable, config: asyncio.run(runnable.ainvoke(questions[3], config=config))  # noqa: E731
    same_trace(compression(async_vectorstore, kind), ainvoke)
    same_trace(in_a_chain(compression(async_vectorstore, kind)), ainvoke)


def test_with_no_engine_work_in_the_base_retriever_the_whole_retriever_runs_as_is(vectorstore) -> None:
    from langchain_classic.retrievers import ContextualCompressionRetriever

    retriever = ContextualCompressionRetriever(base_compressor=KeepAndReverse(),
                                               base_retriever=vectorstore.as_retriever(search_type="mmr", search_kwargs={"k": 2}))
    fast = accel.wrap(retriever)
    assert not fast.lowered
    assert "has no engine work to lower" in fast.explain()


class Refuses(BaseDocumentCompressor):
    def compress_documents(self, documents: Sequence[Document], query: str, callbacks: Any = None) -> Sequence[Document]:
        RunnableLambda(lambda docs: len(docs), name="look").invoke(list(documents), config={"callbacks": callbacks})
        raise ValueError("no documents for you")


def test_a_compressor_error_is_stocks_and_marks_the_same_runs(vectorstore, questions) -> None:
    from langchain_classic.retrievers import ContextualCompressionRetriever

    retriever = ContextualCompressionRetriever(base_compressor=Refuses(), base_retriever=vectorstore.as_retriever(search_kwargs={"k": 2}))

    def raising(runnable: Any, config: Any) -> str:
        with pytest.raises(ValueError, match="no documents for you"):
            runnable.invoke(questions[0], config=config)
        return "raised"

    for app in (retriever, in_a_chain(retriever)):
        stock = same_trace(app, raising)
        assert trees(stock)[0]["error"] == "ValueError"
