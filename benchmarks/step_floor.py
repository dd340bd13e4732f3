"""The step floor: what no schedule of a batch's LLM calls can beat on an engine twin's step
model, prefill charged in full (`step_floor`), and the same floor for a bench run, from the
calls its stock-sequential run made (`run_floor`).

It is a lower bound of the twin's makespan, not of a real engine's, so the bench adds it to a
batch bound only on twins, where the step model is the engine.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accel.engines.twin.profile import LLMConfig, LLMCost

from .call_usage import CallUsage

log = logging.getLogger("accel.benchmarks.step_floor")

Call = tuple[int, int]
"""(prompt tokens the engine computes, output tokens)."""


@dataclass(frozen=True)
class Stage:
    """Encoder work a query waits for between two levels: `items` inputs of `tokens` tokens each
    (a rerank pair counts its query and passage) on the encoder `device` ("embed", "rerank")."""

    device: str
    items: int
    tokens: int


@dataclass(frozen=True)
class Chain:
    """One query's calls by dependency level: a level's calls go out together once the level
    before has finished."""

    levels: tuple[tuple[Call, ...], ...]
    delays: tuple[float, ...] = ()
    """Seconds of other work after level i, before level i + 1 (missing: none)."""
    stages: tuple[tuple[Stage, ...], ...] = ()
    """Encoder calls after level i (and its delay), one after another, before level i + 1
    (missing: none). The step floor, an LLM figure, leaves them out."""
    first: tuple[Stage, ...] = ()
    """Encoder calls before the first level (a query's own embedding, before its first prompt)."""

    def delay(self, level: int) -> float:
        return self.delays[level] if 0 <= level < len(self.delays) else 0.0

    def stages_after(self, level: int) -> tuple[Stage, ...]:
        """The encoder calls after `level`; -1: those before the first level."""
        if level < 0:
            return self.first
        return self.stages[level] if level < len(self.stages) else ()


@dataclass(frozen=True)
class EncoderWork:
    """What one query run alone asked of the encoders, and when (one clock for both): its LLM
    calls' start times, in call order, and each encoder call's arrival with its demand."""

    llm_starts: tuple[float, ...]
    calls: tuple[tuple[float, Stage], ...]


def with_stages(chain: Chain, level_starts: Sequence[float], calls: Sequence[tuple[float, Stage]]) -> Chain:
    """`chain` with the encoder calls of its query placed between its levels: each after the
    last level that had begun when it arrived (before the first level if none had). A call
    that ran beside a level (retrieval beside a planner) so waits for that level: an order the
    run showed, at worst one call early in the model's eyes, never one that the run's calls
    could not have had."""
    first: list[Stage] = []
    after: list[list[Stage]] = [[] for _ in chain.levels]
    for at, stage in sorted(calls, key=lambda c: c[0]):
        begun = sum(1 for start in level_starts if start <= at)
        (first if begun == 0 else after[begun - 1]).append(stage)
    return dataclasses.replace(chain, first=tuple(first), stages=tuple(tuple(level) for level in after))


def step_floor(chains: Sequence[Chain], cost: LLMCost, config: LLMConfig, served: Sequence[Call] | None = None) -> float:
    """No schedule of these chains, sent together to one engine of this step model, ends
    sooner: a lower bound on the makespan, where `llm_schedule.latencies` is one schedule's.
    `served`: the calls the engine must compute (default: every chain's; fewer where equal
    requests are sent once).

    A step costs g(x) = (a^p + (c x)^p)^(1/p) over the x tokens it computes, plus terms linear
    in its sequences and their context. g is convex, so N steps that compute T tokens between
    them cost at least N g(T / N) = ((N a)^p + (c T)^p)^(1/p), which grows with N; and there are
    at least as many steps as the longest chain needs on its own: per level, its slowest call's
    prefill chunks and one step per token after the first. T is every call's prompt plus its
    tokens after the first; the linear terms add each call's own share (a sequence in each of its
    steps, each decode step over the context so far). Unlike the critical path, it
    charges the others' prefill to the makespan; unlike the capacity bound, it credits prefill
    no gain from batching."""
    budget = config.max_num_batched_tokens
    floor = min(cost.floor_s, cost.one_token_floor_s or cost.floor_s)

    def steps(call: Call) -> int:
        prompt, out = call
        return -(-prompt // budget) + out - 1

    longest = max((sum(max(steps(call) for call in level) for level in chain.levels if level) for chain in chains),
                  default=0)
    calls = list(served) if served is not None else [call for chain in chains for level in chain.levels for call in level]
    tokens = sum(prompt + out - 1 for prompt, out in calls)
    body = ((longest * floor) ** cost.overlap_p + (cost.per_token_s * tokens) ** cost.overlap_p) ** (1 / cost.overlap_p)
    context = sum((out - 1) * prompt + out * (out - 1) // 2 for prompt, out in calls)
    return body + cost.per_seq_s * sum(steps(call) for call in calls) + cost.per_context_token_s * context


def run_floor(lone_usage: Sequence[Sequence[CallUsage | None]], levels: Callable[[int], list[int]], cost: LLMCost,
              config: LLMConfig, computed_cap: int | None = None,
              as_sent: Callable[[list[Chain]], float] | None = None,
              encoders: Sequence[EncoderWork] | None = None) -> dict[str, Any] | None:
    """The step floor of a batch whose queries made these calls alone (stock-sequential's run:
    each query's calls with their usage, in start order; `levels` cuts them into dependency
    levels). Equal requests count once, as one request may serve them all (accel's
    `share_requests`); a call's prompt counts only the tokens the prefix cache did not serve in
    that run, where every earlier query's prompts were cached. `computed_cap`: the fewest
    prompt tokens any system's run computed (the server's counters); where the lone calls add up
    to more, every prompt is scaled down to it, so the floor never charges prefill that a
    system was seen to avoid. `as_sent`: the makespan of one schedule of the same chains (every
    call sent when ready, `llm_schedule.makespan_as_sent`), reported beside the floor as
    `as_sent_s`: a reference, not a bound. `encoders` (per query, where the twins logged what
    each lone query asked of them): the same schedule with those calls queued on the encoder
    devices between the levels (`as_sent_encoders_s`, by `as_sent`, which then models them).
    None, with the reason logged, where a query failed or a call's response carried no usage."""
    if not lone_usage or any(not calls or any(u is None for u in calls) for calls in lone_usage):
        log.info("step floor: no floor (a query failed alone, or a response carried no usage)")
        return None
    queries = [[u for u in calls if u is not None] for calls in lone_usage]
    distinct = list({u.request or f"call {q}.{i}": u for q, calls in enumerate(queries) for i, u in enumerate(calls)}.values())
    computed = sum(u.computed_tokens for u in distinct)
    scale = min(1.0, computed_cap / computed) if computed_cap is not None and computed else 1.0

    def call(u: CallUsage) -> Call:
        return max(1, int(u.computed_tokens * scale)), max(1, u.completion_tokens)

    if encoders is not None and len(encoders) != len(queries):
        log.info("step floor: the encoders' calls cover %d of %d queries; left out", len(encoders), len(queries))
        encoders = None
    chains, staged = [], []
    for q, calls in enumerate(queries):
        cut, starts, at = [], [], 0
        for width in levels(len(calls)):
            if calls[at:at + width]:
                cut.append(tuple(call(u) for u in calls[at:at + width]))
                if encoders is not None:
                    starts.append(min(encoders[q].llm_starts[at:at + width], default=float("inf")))
            at += width
        chains.append(Chain(tuple(cut)))
        if encoders is not None:
            staged.append(with_stages(chains[-1], starts, encoders[q].calls))
    return {"value_s": step_floor(chains, cost, config, [call(u) for u in distinct]),
            "as_sent_s": as_sent(chains) if as_sent is not None else None,
            "as_sent_encoders_s": as_sent(staged) if as_sent is not None and encoders is not None else None,
            "encoder_calls": sum(len(work.calls) for work in encoders) if encoders is not None else None,
            "calls": sum(map(len, queries)),
            "distinct_calls": len(distinct), "computed_tokens": sum(call(u)[0] for u in distinct),
            "answer_tokens": sum(call(u)[1] for u in distinct), "prompt_scale": scale}
