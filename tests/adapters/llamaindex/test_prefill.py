"""Refine's prefill split on the real vLLM server: the static head of each refine prompt (the
template text and the query, everything before the previous answer) is prefilled while the
previous call decodes, so the refine request finds it in vLLM's prefix cache."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import accel
from accel.ir import warmed_ids

from .test_query_engine import lowered

REFINE_HEAD = "The original query is as follows: "


def long_question() -> str:
    """A question long enough (several KV blocks) for its refine prefix to be cached; unique,
    so nothing before this test has cached it."""
    words = "which animal sleeps through the winter storm near the old bridge while bread is baking".split()
    return f"{uuid.uuid4().hex} " + " ".join(words[i % len(words)] for i in range(360))


def refine_calls(fast: Any, question: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    """Run `question`; return the (request, result) pairs of refine decodes and of warm-ups."""
    engine = lowered(fast)._session.get_engine(lowered(fast)._synthesis.engine_name)
    seen: list[tuple[Any, Any]] = []
    run = engine.run

    async def recording(batch: Any) -> Any:
        results = await run(batch)
        seen.extend(zip(batch, results, strict=True))
        return results

    monkeypatch.setattr(engine, "run", recording)
    fast.query(question)
    monkeypatch.undo()
    refines = [(r, g) for r, g in seen if (r.prompt or "").startswith(REFINE_HEAD)]
    warmups = [(r, g) for r, g in seen if r.prompt_token_ids is not None]
    return refines, warmups


@pytest.mark.engines
def test_refine_prefix_is_prefilled_early(pg_index: Any, llm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3, response_mode="refine")
    fast = accel.wrap(engine)
    refines, warmups = refine_calls(fast, long_question(), monkeypatch)
    assert len(refines) == 2 and warmups, lowered(fast)._session.warmup_lines()  # why none went, if none
    first_request, first_result = refines[0]
    assert first_result.cached_tokens > 0  # only a warm-up can have cached the first refine's head
    assert first_result.cached_tokens <= len(warmed_ids(warmups[0][0]))


@pytest.mark.engines
def test_without_the_pass_the_first_refine_is_cold(pg_index: Any, llm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3, response_mode="refine")
    fast = accel.wrap(engine, disabled_passes=["prefill_split"])
    refines, warmups = refine_calls(fast, long_question(), monkeypatch)
    assert len(refines) == 2 and not warmups
    assert refines[0][1].cached_tokens == 0


def long_instructions() -> str:
    """Several KV blocks of answer instructions; unique, so no earlier request cached them."""
    words = "answer from the context only and name the module you used whenever you can".split()
    return f"{uuid.uuid4().hex} " + " ".join(words[i % len(words)] for i in range(420))


def instructed_engine(pg_index: Any, llm: Any) -> Any:
    """A compact query engine whose QA prompt opens with long instructions, then LlamaIndex's
    default layout (the context, then the query)."""
    from llama_index.core import PromptTemplate

    qa = PromptTemplate(long_instructions() + "\nContext information is below.\n{context_str}\nQuery: {query_str}\nAnswer: ")
    return pg_index.as_query_engine(llm=llm, similarity_top_k=2, text_qa_template=qa)


def synthesis_calls(fast: Any, question: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    """Run `question`; return the (request, result) pairs of warm-ups and of answer calls."""
    engine = lowered(fast)._session.get_engine(lowered(fast)._synthesis.engine_name)
    seen: list[tuple[Any, Any]] = []
    run = engine.run

    async def recording(batch: Any) -> Any:
        results = await run(batch)
        seen.extend(zip(batch, results, strict=True))
        return results

    monkeypatch.setattr(engine, "run", recording)
    fast.query(question)
    monkeypatch.undo()
    return [(r, g) for r, g in seen if r.prompt_token_ids is not None], [(r, g) for r, g in seen if r.prompt_token_ids is None]


@pytest.mark.engines
def test_answer_prompt_head_is_prefilled_while_retrieval_runs(pg_index: Any, llm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Teola's central overlap inside one query graph: the QA prompt's static head is warmed by
    a node that waits for nothing (it runs beside embedding and search), and the first
    synthesis call, planned by the Expand node once the nodes are known, finds it cached."""
    from accel.ir import Kind

    engine = instructed_engine(pg_index, llm)
    fast = accel.wrap(engine)
    explained = fast.explain()
    assert "query e-graph" in explained and "synthesize [Expand]" in explained
    assert "synthesize: first 1 prompt part(s) prefilled early by synthesize#warm" in explained
    graph = lowered(fast)._query_template().graph
    warm = graph.node("synthesize#warm")
    assert warm.kind is Kind.PARTIAL_PREFILL and not graph.preds(warm.name)  # starts with the query
    retrieval = [n.name for n in graph.nodes() if n.kind in (Kind.EMBED, Kind.SEARCH)]
    assert retrieval and all(warm.name not in graph.succs(r) for r in retrieval)
    question = "music at dawn"
    warmups, answers = synthesis_calls(fast, question, monkeypatch)
    assert warmups and len(answers) == 1, lowered(fast)._session.warmup_lines()  # (share_prefixes may warm the head again inside the sub-run: a cache hit)
    warmed = len(warmed_ids(warmups[0][0]))  # the first warm-up: the one beside retrieval
    block = lowered(fast)._session.get_engine(lowered(fast)._synthesis.engine_name).block_size
    assert warmed >= 2 * block and warmed % block == 0
    assert answers[0][1].cached_tokens >= warmed  # the first synthesis call found the head in the cache
    assert fast.query(question).response == engine.query(question).response


@pytest.mark.engines
def test_the_overlap_warm_up_alone_caches_the_head(pg_index: Any, llm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Parrot's prefix sharing (which warms the head again right before the call), the
    one warm-up is the one that ran beside retrieval, and the call still finds the head cached."""
    fast = accel.wrap(instructed_engine(pg_index, llm), disabled_passes=["share_prefixes"])
    warmups, answers = synthesis_calls(fast, "music at dawn", monkeypatch)
    assert len(warmups) == 1 and len(answers) == 1, lowered(fast)._session.warmup_lines()
    assert answers[0][1].cached_tokens >= len(warmed_ids(warmups[0][0])) > 0


@pytest.mark.engines
def test_without_the_pass_the_answer_prompt_is_cold(pg_index: Any, llm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = accel.wrap(instructed_engine(pg_index, llm), disabled_passes=["prefill_split", "share_prefixes"])
    assert "synthesize#warm" not in fast.explain()
    warmups, answers = synthesis_calls(fast, "music at dawn", monkeypatch)
    assert not warmups and len(answers) == 1
    assert answers[0][1].cached_tokens == 0
