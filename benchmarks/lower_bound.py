"""The critical-path lower bound of one query: what a lone query could take if every
independent step ran side by side and nothing waited for anything but its inputs.

LLM calls are timed in the stock single-query run (no other load), grouped by the example's
dependency levels (a level costs its slowest call). The non-LLM primitives on the path
(embedding the expanded queries as one batch, cross-encoding the candidate pairs as one batch)
are profiled here on the same models with workload text, fastest of a few repeats; vector
search (milliseconds on this corpus) is left out, which keeps the bound a bound.
accel latency / bound says how close a system gets to the limit (1.0 is the limit).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from .apps import ExampleSpec

REPEATS = 3


def fastest(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    """The fastest of `repeats` timed calls after one warm-up: the run least disturbed by
    other processes on shared cores."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def profile_steps(spec: ExampleSpec, stack: Any, questions: Sequence[str], chunks: Sequence[str]) -> dict[str, float]:
    """Seconds of each batched non-LLM primitive on the example's critical path."""
    from sentence_transformers import CrossEncoder, SentenceTransformer

    steps: dict[str, float] = {}
    if spec.embed_batch:
        embedder = SentenceTransformer(stack.embed_model, device="cpu")
        texts = [questions[i % len(questions)] for i in range(spec.embed_batch)]
        steps[f"embed x{spec.embed_batch}"] = fastest(lambda: embedder.encode(texts))
    if spec.rerank_pairs:
        reranker = CrossEncoder(stack.rerank_model, device="cpu")
        pairs = [(questions[0], chunks[i % len(chunks)]) for i in range(spec.rerank_pairs)]
        steps[f"rerank x{spec.rerank_pairs}"] = fastest(lambda: reranker.predict(pairs))
    return steps


def llm_path(durations: Sequence[float], levels: Sequence[int]) -> float:
    """Sum over dependency levels of the slowest call in each level."""
    total, at = 0.0, 0
    for size in levels:
        group = durations[at:at + size]
        if group:
            total += max(group)
        at += size
    return total


def lower_bound(spec: ExampleSpec, per_query_llm: Sequence[Sequence[float]], steps: dict[str, float]) -> dict[str, Any]:
    """Per-query bounds from each query's LLM call durations plus the profiled steps."""
    fixed = sum(steps.values())
    bounds = [llm_path(calls, spec.llm_levels(len(calls))) + fixed for calls in per_query_llm]
    return {
        "per_query_s": bounds,
        "mean_s": sum(bounds) / len(bounds) if bounds else None,
        "llm_calls_per_query": [len(c) for c in per_query_llm],
        "llm_path_s": [llm_path(calls, spec.llm_levels(len(calls))) for calls in per_query_llm],
        "profiled_steps_s": steps,
    }
