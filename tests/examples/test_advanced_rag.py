"""The advanced-RAG examples run stock on the real engines: the workflow has the promised
shape (3 queries, 16 chunks each, 3 reranked chunks, refine: 1 + 3 LLM calls) and its answers
are deterministic, alone or concurrently, and the same from the hand-parallelised variant."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from accel.benchmarks.drivers import driver_for
from accel.benchmarks.workload import build_workload
from accel.examples.stack import StackConfig

pytestmark = [pytest.mark.engines, pytest.mark.slow]

MODULES = ("heapq", "bisect", "fnmatch")


@pytest.fixture(scope="module")
def workload() -> Any:
    return build_workload(3, modules=MODULES, max_chars=1500)


@pytest.fixture(scope="module", params=["langchain", "llamaindex"])
def built(request: pytest.FixtureRequest, stack: StackConfig, workload: Any) -> tuple[str, Any, Any]:
    framework = request.param
    if framework == "langchain":
        from accel.examples.langchain import advanced_rag as module
    else:
        from accel.examples.llamaindex import advanced_rag as module
    index = module.build_index(stack, workload.documents, f"t_{uuid.uuid4().hex[:8]}")
    return framework, module.build_app(stack, index), module.build_app(stack, index, parallel=True)


def test_answers_are_deterministic_alone_concurrent_and_hand_parallel(built: tuple[str, Any, Any], workload: Any) -> None:
    framework, app, parallel = built
    driver = driver_for(framework)
    try:
        first = [driver.call(app, q) for q in workload.questions]
        assert all(isinstance(text, str) and text for text in first)
        assert [driver.call(app, q) for q in workload.questions] == first
        assert driver.batch(app, workload.questions, 3) == first
        assert [driver.call(parallel, q) for q in workload.questions] == first
    finally:
        driver.close()


def test_one_expansion_call_then_one_refine_call_per_reranked_chunk(built: tuple[str, Any, Any], workload: Any) -> None:
    framework, app, _ = built
    driver = driver_for(framework)
    try:
        with driver.timing() as calls:
            driver.call(app, workload.questions[0])
    finally:
        driver.close()
    assert len(calls.durations()) == 1 + 3


def test_langchain_retrieval_has_three_queries_sixteen_chunks_each_reranked_to_three(stack: StackConfig, workload: Any) -> None:
    from accel.examples.langchain import advanced_rag

    store = advanced_rag.build_index(stack, workload.documents, f"t_{uuid.uuid4().hex[:8]}")
    app = advanced_rag.build_app(stack, store)
    retriever = app.steps[0].mapper.steps__["docs"].last
    expand = retriever.base_retriever
    question = workload.questions[0]
    queries = expand.generate_queries(question, _NoRun())
    assert len(queries) <= advanced_rag.QUERIES_GENERATED
    per_query = [expand.retriever.invoke(q) for q in [*queries, question]]
    assert all(len(docs) == advanced_rag.TOP_K for docs in per_query)
    assert len(retriever.invoke(question)) == advanced_rag.TOP_N


class _NoRun:
    def get_child(self) -> None:
        return None
