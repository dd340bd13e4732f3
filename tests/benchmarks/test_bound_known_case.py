"""The in-run bound on a workload whose critical path is known by construction: fake engines
with fixed latencies on a virtual clock, driven through the harness's own rounds
(`run_rounds`), bound rounds (`Meter`, `StepProbe`) and invariant (`settle`, `attach`).

The fake advanced RAG: an expansion LLM call (0.5 s), 3 queries embedded together (0.1 s), 3
searches (0.02 s each), 16 pairs reranked (0.3 s), 3 refine calls (0.5 s each). Its critical
path, with the 3 searches side by side, is 2.42 s; stock runs the searches one after another
(2.46 s), the "accel" app side by side (exactly the critical path)."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from accel.benchmarks import bounds, summary
from accel.benchmarks.apps import ExampleSpec
from accel.benchmarks.lower_bound import StepProbe
from accel.benchmarks.runner import run_rounds
from accel.benchmarks.systems import ACCEL, STOCK_SEQUENTIAL, Apps, System
from accel.testing.fakes import FakeEngine

LLM_S, EMBED_S, SEARCH_S, RERANK_S = 0.5, 0.1, 0.02, 0.3
CRITICAL_PATH_S = LLM_S + EMBED_S + SEARCH_S + RERANK_S + 3 * LLM_S
STOCK_S = CRITICAL_PATH_S + 2 * SEARCH_S
SPEC = ExampleSpec("fake-rag", {}, "fake advanced RAG", embed_batch=3, rerank_pairs=16, search_k=16)
QUESTIONS = [f"question {i}" for i in range(6)]


def _virtual_loop() -> asyncio.AbstractEventLoop:
    """tests/core/runtime's virtual-time loop: the clock jumps to the next timer when idle."""
    path = Path(__file__).resolve().parents[1] / "core" / "runtime" / "conftest.py"
    spec = importlib.util.spec_from_file_location("runtime_virtual_clock", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VirtualTimeLoop()


class Load:
    """Extra seconds the bound's own step timings see (a busy machine while they ran)."""

    def __init__(self) -> None:
        self.embed_s = 0.0


class FakeRag:
    """The fake app, a driver for it (timing LLM calls on the virtual clock) and the probe."""

    def __init__(self, load: Load) -> None:
        self.loop = _virtual_loop()
        self.llm = FakeEngine("llm", latency=LLM_S, record=False)
        self.embed = FakeEngine("embed", latency=EMBED_S, record=False)
        self.probe_embed = FakeEngine("embed", latency=lambda n: EMBED_S + load.embed_s, record=False)
        self.search = FakeEngine("search", latency=SEARCH_S, record=False)
        self.rerank = FakeEngine("rerank", latency=RERANK_S, record=False)
        self.calls: list[float] | None = None
        self.framework = "fake"

    async def _llm(self, prompt: str) -> str:
        began = self.loop.time()
        (out,) = await self.llm.run([prompt])
        if self.calls is not None:
            self.calls.append(self.loop.time() - began)
        return out

    async def app(self, question: str, parallel: bool) -> str:
        await self._llm(f"expand {question}")
        vectors = await self.embed.run([question] * 3)
        if parallel:
            await asyncio.gather(*(self.search.run([v]) for v in vectors))
        else:
            for v in vectors:
                await self.search.run([v])
        await self.rerank.run([(question, j) for j in range(16)])
        for k in range(3):
            await self._llm(f"refine {k} {question}")
        return f"answer to {question}"

    # the Driver protocol, as much of it as single mode uses
    def call(self, app: Callable[[str], Any], question: str) -> str:
        return self.loop.run_until_complete(app(question))

    @contextmanager
    def timing(self) -> Iterator[Any]:
        self.calls = []
        calls = self.calls

        class Timer:
            def durations(self) -> list[float]:
                return list(calls)

            def usage(self) -> list[None]:  # fake engines report no tokens: no step floor
                return [None] * len(calls)

        try:
            yield Timer()
        finally:
            self.calls = None

    def probe(self) -> StepProbe:
        def run(engine: FakeEngine, batch: list[Any]) -> Any:
            return self.loop.run_until_complete(engine.run(batch))

        return StepProbe({"embed x3": lambda i: run(self.probe_embed, [QUESTIONS[i]] * 3),
                          "search k16": lambda i: run(self.search, [i]),
                          "rerank x16": lambda i: run(self.rerank, list(range(16)))}, clock=self.loop.time)

    def time_stock(self, i: int) -> list[float] | None:
        with self.timing() as timer:
            self.call(lambda q: self.app(q, parallel=False), QUESTIONS[i])
        return timer.durations()


def _run(load: Load, *, load_after: float) -> tuple[dict[str, Any], FakeRag]:
    """Single mode through the harness's rounds and bound code; `load_after`: the load the
    bound's re-measurements see."""
    fake = FakeRag(load)
    apps = Apps(lambda q: fake.app(q, parallel=False), lambda q: fake.app(q, parallel=True))
    systems = [System(STOCK_SEQUENTIAL, lambda a: a.stock, False), System(ACCEL, lambda a: a.parallel, True)]
    meter = bounds.Meter(SPEC, fake.time_stock, fake.probe())
    rounds: list[bounds.Round | None] = []
    runs = run_rounds(systems, apps, fake, QUESTIONS, timed=STOCK_SEQUENTIAL, clock=fake.loop.time,  # type: ignore[arg-type]
                      after_round=lambda i, calls: rounds.append(meter.round(i, calls)))
    load.embed_s = load_after
    measured = bounds.Measured(SPEC, "single", len(QUESTIONS), {})
    settled = bounds.settle(measured, rounds, meter.round, {None: runs}, clock=fake.loop.time)
    report: dict[str, Any] = {"mode": "single", "headline_metric": "mean latency"}
    bounds.attach(report, measured, settled, [runs], ACCEL)
    return report, fake


def test_the_bound_of_a_known_workload_is_its_critical_path() -> None:
    report, _ = _run(Load(), load_after=0.0)
    bound = report["bound"]
    assert report["lower_bound"]["per_query_s"] == pytest.approx([CRITICAL_PATH_S] * len(QUESTIONS))
    assert report["lower_bound"]["llm_calls_per_query"] == [4] * len(QUESTIONS)
    assert bound["established"] and bound["remeasured"] == 0
    assert bound["value_s"] == pytest.approx(CRITICAL_PATH_S)
    assert bound["min_s"] == pytest.approx(CRITICAL_PATH_S) and bound["median_s"] == pytest.approx(CRITICAL_PATH_S)
    assert bound["accel_over_bound"] == pytest.approx(1.0)  # the parallel app runs exactly on the critical path
    assert bound["accel_over_bound_spread"]["rounds"] == len(QUESTIONS)


def test_a_bound_above_a_measured_system_is_re_measured_until_it_holds() -> None:
    load = Load()
    load.embed_s = 0.2  # the bound's embedding timed on a busy machine: above the accel app
    report, _ = _run(load, load_after=0.0)
    bound = report["bound"]
    assert bound["established"] and bound["remeasured"] == 1 and not bound["violations"]
    assert bound["value_s"] == pytest.approx(CRITICAL_PATH_S)
    assert bound["accel_over_bound"] == pytest.approx(1.0)


def test_a_bound_that_stays_above_a_system_is_not_established_and_gives_no_ratio() -> None:
    load = Load()
    load.embed_s = 0.2
    report, _ = _run(load, load_after=0.2)
    bound = report["bound"]
    assert not bound["established"] and bound["remeasured"] == bounds.MAX_PASSES
    assert bound["accel_over_bound"] is None and bound["accel_over_bound_spread"] is None
    assert {v["system"] for v in bound["violations"]} == {STOCK_SEQUENTIAL, ACCEL}  # 2.62 s above both
    assert bound["violations"][0]["bound_s"] == pytest.approx(CRITICAL_PATH_S + 0.2)
    phrase = summary._bound_phrase(bound)
    assert phrase.startswith("critical-path bound not established") and "under" not in phrase
    assert "not established" in summary.bound_line(report | {"bound": bound})
