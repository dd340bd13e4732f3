"""Runs one workload through each system and records latencies, outputs and failures.

Modes (all systems see the same questions in the same order):
- single: one query at a time; latency of a lone query.
- batch: all queries at once; concurrent systems get them as one stock batch (LangChain
  `batch`, LlamaIndex `gather`) or, wrapped, the same call on the wrapped app.
- poisson: queries arrive at seeded Poisson times; each is served on its own thread (one thread
  for the sequential system, so later queries queue); latency counts from arrival.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from .drivers import Driver
from .systems import Apps, System

Mode = Literal["single", "batch", "poisson"]
MODES: tuple[str, ...] = ("single", "batch", "poisson")
WARMUP_QUESTION = "What is this module for?"


@dataclass
class SystemRun:
    """One system's run: per-query latency and answer (None where the query failed)."""

    system: str
    mode: str
    rate: float | None = None
    latencies: list[float | None] = field(default_factory=list)
    outputs: list[str | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    makespan_s: float | None = None
    setup_error: str | None = None
    llm_calls: list[list[float]] = field(default_factory=list)  # per query, single mode, timed runs
    prompt_cache: dict[str, Any] | None = None  # the server's prompt / cached tokens during the run

    @property
    def ok(self) -> bool:
        return self.setup_error is None and not self.errors


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _timed(driver: Driver, app: Any, question: str) -> tuple[float, str | None, str | None]:
    start = time.perf_counter()
    try:
        text: str | None = driver.call(app, question)
        error = None
    except Exception as exc:  # a failing query is a result, not a crash of the harness
        text, error = None, _describe(exc)
    return time.perf_counter() - start, text, error


def _record(run: SystemRun, results: Sequence[tuple[float | None, str | None, str | None]]) -> SystemRun:
    for latency, text, error in results:
        run.latencies.append(latency if error is None else None)
        run.outputs.append(text)
        if error is not None:
            run.errors.append(error)
    return run


def run_single(driver: Driver, app: Any, questions: Sequence[str], run: SystemRun, *, time_llm: bool = False) -> SystemRun:
    """`time_llm`: also time each query's LLM calls (for the critical-path lower bound)."""
    start = time.perf_counter()
    results = []
    for question in questions:
        if not time_llm:
            results.append(_timed(driver, app, question))
            continue
        with driver.timing() as calls:
            results.append(_timed(driver, app, question))
        run.llm_calls.append(calls.durations())
    run.makespan_s = time.perf_counter() - start
    return _record(run, results)


def run_batch(driver: Driver, app: Any, questions: Sequence[str], run: SystemRun, system: System, concurrency: int) -> SystemRun:
    start = time.perf_counter()
    if not system.concurrent:
        results = [_timed(driver, app, q) for q in questions]
        run.makespan_s = time.perf_counter() - start
        return _record(run, results)
    outs = driver.batch(app, questions, concurrency)
    run.makespan_s = time.perf_counter() - start
    # a stock batch reports no per-query finish times: every query's latency is the makespan
    return _record(run, [
        (run.makespan_s, None, _describe(o)) if isinstance(o, BaseException) else (run.makespan_s, o, None)
        for o in outs
    ])


def run_poisson(driver: Driver, app: Any, questions: Sequence[str], arrivals: Sequence[float], run: SystemRun,
                system: System, concurrency: int) -> SystemRun:
    workers = concurrency if system.concurrent else 1
    start = time.perf_counter()

    def serve(question: str, due: float) -> tuple[float, str | None, str | None]:
        _, text, error = _timed(driver, app, question)
        return time.perf_counter() - due, text, error

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"bench-{system.name}") as pool:
        futures = []
        for question, offset in zip(questions, arrivals):
            # the load generator's clock: release each query at its arrival time
            time.sleep(max(0.0, start + offset - time.perf_counter()))
            futures.append(pool.submit(serve, question, start + offset))
        results = [f.result() for f in futures]
    run.makespan_s = time.perf_counter() - start
    return _record(run, results)


def run_system(
    system: System,
    apps: Apps,
    driver: Driver,
    questions: Sequence[str],
    mode: Mode,
    *,
    arrivals: Sequence[float] = (),
    rate: float | None = None,
    concurrency: int = 16,
    before: Callable[[], None] = lambda: None,
    time_llm: bool = False,
) -> SystemRun:
    """Build the system's app, warm it up with one query outside the workload, run the mode."""
    run = SystemRun(system.name, mode, rate)
    try:
        app = system.build(apps)
        before()
        driver.call(app, WARMUP_QUESTION)
    except Exception as exc:
        run.setup_error = _describe(exc) + "\n" + traceback.format_exc(limit=3)[-800:]
        return run
    if mode == "single":
        return run_single(driver, app, questions, run, time_llm=time_llm)
    if mode == "batch":
        return run_batch(driver, app, questions, run, system, concurrency)
    return run_poisson(driver, app, questions, arrivals, run, system, concurrency)
