"""Measures what the capacity bound needs on the benchmark's own engines and text: each engine's
throughput against batch size, and how much of one query's work each engine does.

The per-query work comes from the same data as the critical-path bound: the example's shape
(`embed_batch` texts and the fewest `rerank_pairs` pairs per query) and the LLM seconds each
stock query spent alone (timed in the stock one-query-at-a-time run). The LLM's gain from
batching is measured on fresh short prompts (a workload question, the app's output length, a new
counter in front so vLLM's prefix cache cannot flatter the repeats): decoding gains the most
from batching and prefilling a long prompt the least, so no call of the app gains more than
this, and batch-1 LLM seconds over that gain is at most the LLM's work at its best batch. (A
refine call's prompt, three chunks long, gained 10-20x at batch 32 on the `h100-8b` twins where
the apps' own calls gained more, so a bound built on it lay above measured runs.)
Vector search (milliseconds here) is left out, which keeps the bound a bound. `CapacityProbe`
measures all this once per bound round, interleaved with the systems' runs (`bounds.py`).

No engine can batch more than the workload ever holds in flight at once: `queries` times a
query's texts, pairs, or widest level of mutually independent LLM calls. A chain of four
dependent LLM calls keeps at most one per query in flight, so 32 such queries never give the
LLM a batch of 128. Each ladder therefore stops at the first size that covers the most in
flight (`ladder_top`); the throughput there is at least what any schedule of the workload can
reach, which keeps the bound a bound while no longer crediting batches the workload cannot form.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .apps import ExampleSpec
from .capacity_bound import ONE_DEVICE, EngineWork
from .lower_bound import fastest

TEXT_SIZES: tuple[int, ...] = (1, 4, 8, 16, 32)
TEXT_REPEATS = 2
TEXT_MOST = 1024
LLM_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
LLM_REPEATS = 2
LLM_MOST = 512
STILL_GAINING = 1.1
"""A ladder of batch sizes goes on doubling past its last size (up to `TEXT_MOST` /
`LLM_MOST`) while one of its last two doublings still gains this much throughput. This CPU's engines stop
gaining by 32; a GPU's gain far beyond (docs/twins.md: encoders to 1024, an 8B model's decode
past 128), and a capacity bound that stopped at 32 lay above what stock-concurrent measured on
the `h100-8b` twins, so it was not established (docs/benchmarks-twin.md)."""

Progress = Callable[[str], None]


def ladder_top(in_flight: float, most: int) -> int:
    """The largest batch size worth measuring for a workload that holds at most `in_flight`
    items at once: the first power of two at or above it, at most `most`."""
    size = 1
    while size < in_flight and size < most:
        size *= 2
    return size


def best_of(throughputs: dict[int, float]) -> tuple[int, float]:
    """(batch size, items/s) of the highest measured throughput."""
    size = max(throughputs, key=lambda b: throughputs[b])
    return size, throughputs[size]


def still_gaining(rates: dict[int, float], most: int) -> int | None:
    """The next size of a ladder one of whose last two doublings still gained `STILL_GAINING`,
    else None. One flat doubling is not the end: measured GPU curves have flat stretches (the
    `h100-8b` reranker gains 1.06x from 16 to 32 pairs and 1.54x from 32 to 64), and a ladder
    that stopped at the first one credited the engine half its throughput, which put the bound
    above what a schedule can reach."""
    last = max(rates)
    if 2 * last > most or last // 2 not in rates:
        return None
    gained = rates[last] >= STILL_GAINING * rates[last // 2]
    gained_before = last // 4 in rates and rates[last // 2] >= STILL_GAINING * rates[last // 4]
    return 2 * last if gained or gained_before else None


def text_throughputs(run: Callable[[int], Any], sizes: Sequence[int] = TEXT_SIZES, most: int = TEXT_MOST) -> dict[int, float]:
    """Items per second of `run(b)` at each batch size b (fastest of a few, after a warm-up),
    and at doublings past the last while they still gain."""
    rates = {b: b / fastest(lambda: run(b), TEXT_REPEATS) for b in sizes}
    while (size := still_gaining(rates, most)) is not None:
        rates[size] = size / fastest(lambda: run(size), TEXT_REPEATS)
    return rates


async def llm_speedups(base_url: str, model: str, prompt_text: str, max_tokens: int,
                       sizes: Sequence[int] = LLM_SIZES, repeats: int = LLM_REPEATS, most: int = LLM_MOST) -> dict[int, float]:
    """Throughput of b concurrent fresh requests over throughput of one, per batch size b (and
    doublings past the last while they still gain)."""
    from accel.engines.base import GenerationRequest, SamplingParams
    from accel.engines.llm import OpenAIServerEngine

    counter = itertools.count()
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, extra={"ignore_eos": True})

    def fresh(n: int) -> list[GenerationRequest]:
        return [GenerationRequest(prompt=f"Request {next(counter)}. {prompt_text}", params=params) for _ in range(n)]

    async def throughput(engine: OpenAIServerEngine, size: int) -> float:
        best = float("inf")
        for _ in range(repeats):
            began = time.perf_counter()
            await engine.run(fresh(size))
            best = min(best, time.perf_counter() - began)
        return size / best

    async with OpenAIServerEngine(base_url, model) as engine:
        await engine.run(fresh(1))  # warm-up
        rates = {size: await throughput(engine, size) for size in sizes}
        while (size := still_gaining(rates, most)) is not None:
            rates[size] = await throughput(engine, size)
    return {b: rate / rates[sizes[0]] for b, rate in rates.items()}


class CapacityProbe:
    """Each engine's work per query at its best batch size, measurable once per bound round:
    the models are loaded once, the first round profiles every batch size and later rounds
    only batch 1 (the LLM's reference) and the best size found. `devices`: the device each
    engine ("embed", "rerank", "llm") computes on, where they are not all one (`ONE_DEVICE`)."""

    def __init__(self, spec: ExampleSpec, stack: Any, questions: Sequence[str], chunks: Sequence[str], queries: int,
                 devices: Mapping[str, str] | None = None) -> None:
        from .encoders import encoders_for

        self.spec, self.stack, self.queries = spec, stack, queries
        self.devices = dict(devices or {})
        self.best: dict[tuple[str, int], int] = {}
        self.texts = [questions[i % len(questions)] for i in range(TEXT_MOST)]
        self.pairs = [(questions[i % len(questions)], chunks[i % len(chunks)]) for i in range(TEXT_MOST)]
        self.prompt = f"Question: {questions[0]}\nAnswer:"
        self.encoders = encoders_for(stack, embed=bool(spec.embed_batch), rerank=bool(spec.rerank_pairs))

    def _ladder(self, engine: str, all_sizes: Sequence[int], top: int) -> Sequence[int]:
        """The sizes to measure up to `top`: the whole ladder the first time, then the first
        size (the reference) and the best one found."""
        best = self.best.get((engine, top))
        return tuple(b for b in all_sizes if b <= top) if best is None else tuple(sorted({all_sizes[0], best}))

    def _text_work(self, engine: str, unit: str, per_query: int, run: Callable[[int], Any]) -> EngineWork:
        top = ladder_top(self.queries * per_query, TEXT_MOST)
        size, rate = best_of(text_throughputs(run, self._ladder(engine, TEXT_SIZES, top), top))
        self.best[(engine, top)] = size
        return EngineWork(engine, per_query, unit, rate, size, self.devices.get(engine, ONE_DEVICE))

    def work(self, llm_s_per_query: float, llm_width: int = 1, progress: Progress = lambda _: None) -> list[EngineWork]:
        """Each engine's work per query at its best measured batch size up to what the workload
        holds in flight, measured now; `llm_width`: the query's widest level of independent
        LLM calls."""
        work: list[EngineWork] = []
        encoders = self.encoders
        if self.spec.embed_batch:
            progress("capacity bound: embedder throughput vs batch size")
            work.append(self._text_work("embed", "texts", self.spec.embed_batch, lambda b: encoders.embed(self.texts[:b])))
        if self.spec.rerank_pairs:
            progress("capacity bound: reranker throughput vs batch size")
            work.append(self._text_work("rerank", "pairs", self.spec.rerank_pairs, lambda b: encoders.rerank(self.pairs[:b])))
        progress("capacity bound: LLM throughput vs batch size")
        top = ladder_top(self.queries * llm_width, LLM_MOST)
        speedups = asyncio.run(llm_speedups(self.stack.openai_base_url, self.stack.model, self.prompt, self.stack.max_tokens,
                                            self._ladder("llm", LLM_SIZES, top), most=top))
        size, gain = best_of(speedups)
        self.best[("llm", top)] = size
        work.append(EngineWork("llm", llm_s_per_query, "batch-1 s", gain, size, self.devices.get("llm", ONE_DEVICE)))
        return work
