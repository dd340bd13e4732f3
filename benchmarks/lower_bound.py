"""The critical-path lower bound of one query: what a lone query could take if every
independent step ran side by side and nothing waited for anything but its inputs.

It is measured inside the run, in rounds interleaved with the systems' own (`BoundRound`): in
round i stock's LLM calls are timed during stock's run of query i, grouped by the example's
dependency levels (a level costs its slowest call), and the non-LLM primitives on the path
(embedding the expanded queries as one batch, one vector search, cross-encoding the candidate
pairs as one batch) are timed once right after, on the same models with the same text
(`StepProbe`). Timing the bound alone at another moment let machine load move it by ±30%.
The bound takes the systems' statistic (mean over rounds) and reports its spread (min, median).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .apps import ExampleSpec

REPEATS = 3
Clock = Callable[[], float]


def fastest(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    """The fastest of `repeats` timed calls after one warm-up (engine profiles only)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@dataclass
class StepProbe:
    """Times each non-LLM step of the critical path once per round; `steps` maps a step's name
    to a call on query i. `clock` is injectable so a test can run it on a virtual clock."""

    steps: dict[str, Callable[[int], Any]]
    clock: Clock = time.perf_counter
    warmed: bool = field(default=False, init=False)

    def time(self, query: int) -> dict[str, float]:
        if not self.warmed:  # first calls load kernels and caches that no round should pay for
            for step in self.steps.values():
                step(query)
            self.warmed = True
        out: dict[str, float] = {}
        for name, step in self.steps.items():
            began = self.clock()
            step(query)
            out[name] = self.clock() - began
        return out


def encoder_probe(spec: ExampleSpec, stack: Any, driver: Any, index: Any, questions: Sequence[str],
                  chunks: Sequence[str]) -> StepProbe:
    """The example's embedding, search and rerank steps on the run's own encoders and index."""
    from .encoders import encoders_for

    steps: dict[str, Callable[[int], Any]] = {}
    encoders = encoders_for(stack, embed=bool(spec.embed_batch or spec.search_k), rerank=bool(spec.rerank_pairs))

    def texts(i: int) -> list[str]:
        return [questions[(i + j) % len(questions)] for j in range(max(spec.embed_batch, 1))]

    if spec.embed_batch:
        steps[f"embed x{spec.embed_batch}"] = lambda i: encoders.embed(texts(i))
    if spec.search_k and index is not None:
        vectors = encoders.embed(list(questions))  # searches are independent: one is on the path
        steps[f"search k{spec.search_k}"] = lambda i: driver.search(index, vectors[i % len(vectors)], spec.search_k)
    if spec.rerank_pairs:
        steps[f"rerank x{spec.rerank_pairs}"] = lambda i: encoders.rerank(
            [(questions[i % len(questions)], chunks[(i + j) % len(chunks)]) for j in range(spec.rerank_pairs)])
    return StepProbe(steps)


def llm_path(durations: Sequence[float], levels: Sequence[int]) -> float:
    """Sum over dependency levels of the slowest call in each level."""
    total, at = 0.0, 0
    for size in levels:
        group = durations[at:at + size]
        if group:
            total += max(group)
        at += size
    return total


@dataclass(frozen=True)
class BoundRound:
    """One round's measurement of query `query`: stock's LLM call durations, the steps' times."""

    query: int
    llm_calls: tuple[float, ...]
    steps: dict[str, float]

    def value(self, spec: ExampleSpec) -> float:
        return llm_path(self.llm_calls, spec.llm_levels(len(self.llm_calls))) + sum(self.steps.values())


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Mean (the systems' statistic), min and median of per-round values."""
    if not values:
        return {"mean_s": None, "min_s": None, "median_s": None, "rounds": 0}
    return {"mean_s": sum(values) / len(values), "min_s": min(values), "median_s": statistics.median(values),
            "rounds": len(values)}


def lower_bound(spec: ExampleSpec, rounds: Sequence[BoundRound]) -> dict[str, Any]:
    """The critical-path bound of the run's rounds: per round, and its mean / min / median."""
    values = [r.value(spec) for r in rounds]
    names = list(rounds[0].steps) if rounds else []
    return {
        "queries": [r.query for r in rounds],
        "per_query_s": values,
        **spread(values),
        "llm_calls_per_query": [len(r.llm_calls) for r in rounds],
        "llm_path_s": [llm_path(r.llm_calls, spec.llm_levels(len(r.llm_calls))) for r in rounds],
        "profiled_steps_s": {n: statistics.median(r.steps.get(n, 0.0) for r in rounds) for n in names},
    }
