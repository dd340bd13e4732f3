"""Refine's prefill split on the real vLLM server: the static head of each refine prompt (the
template text and the query, everything before the previous answer) is prefilled while the
previous call decodes, so the refine request finds it in vLLM's prefix cache."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import accel

REFINE_HEAD = "The original query is as follows: "


def long_question() -> str:
    """A question long enough (several KV blocks) for its refine prefix to be cached; unique,
    so nothing before this test has cached it."""
    words = "which animal sleeps through the winter storm near the old bridge while bread is baking".split()
    return f"{uuid.uuid4().hex} " + " ".join(words[i % len(words)] for i in range(360))


def refine_calls(fast: Any, question: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    """Run `question`; return the (request, result) pairs of refine decodes and of warm-ups."""
    engine = fast._session.get_engine(fast._synthesis.engine_name)
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
    refines, warmups = refine_calls(accel.wrap(engine), long_question(), monkeypatch)
    assert len(refines) == 2 and warmups
    first_request, first_result = refines[0]
    assert first_result.cached_tokens > 0  # only a warm-up can have cached the first refine's head
    assert first_result.cached_tokens <= len(warmups[0][0].prompt_token_ids)


@pytest.mark.engines
def test_without_the_pass_the_first_refine_is_cold(pg_index: Any, llm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3, response_mode="refine")
    fast = accel.wrap(engine, disabled_passes=["prefill_split"])
    refines, warmups = refine_calls(fast, long_question(), monkeypatch)
    assert len(refines) == 2 and not warmups
    assert refines[0][1].cached_tokens == 0
