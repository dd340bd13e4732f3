"""Runs one workload through each system and records latencies, outputs and failures.

Modes (all systems see the same questions in the same order):
- single: one query at a time; latency of a lone query. The systems take turns in rounds
  (`run_rounds`): round i runs query i on every system, the first system rotating, then
  measures the bound's round, so machine load moves every system and the bound alike.
- batch: all queries at once; concurrent systems get them as one stock batch (LangChain
  `batch`, LlamaIndex `gather`) or, wrapped, the same call on the wrapped app.
- poisson: queries arrive at seeded Poisson times; each is served on its own thread (one thread
  for the sequential system, so later queries queue); latency counts from arrival.

Every measured window runs on a settled heap (`settled_heap`): the systems share one process,
and a full garbage collection over what earlier systems left paused whichever system ran when
its threshold tripped (0.40 s, 0.6 s into a 3 s Poisson window, 2026-11-27).
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from .call_usage import CallUsage
from .drivers import Driver
from .systems import Apps, System

Mode = Literal["single", "batch", "poisson"]
MODES: tuple[str, ...] = ("single", "batch", "poisson")
WARMUP_QUESTION = "What is this module for?"


@dataclass(frozen=True)
class QuerySpans:
    """When one query run alone began and ended, and each of its LLM calls (in the order of its
    `llm_calls`), on `time.monotonic`: the clock an engine twin on this host stamps its calls
    with, so the twins' logs can say which of their calls each query made (`twin_run.py`)."""

    start: float
    end: float
    llm: tuple[tuple[float, float], ...]


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
    llm_calls: list[list[float]] = field(default_factory=list)  # per query: LLM call durations timed for the bound
    llm_usage: list[list[CallUsage | None]] = field(default_factory=list)  # per query: those calls' tokens, same order
    lone_spans: list[QuerySpans | None] = field(default_factory=list)  # per query: when it and those calls ran (None: failed)
    prompt_cache: dict[str, Any] | None = None  # the server's prompt / cached tokens during the run
    encoder_requests: dict[str, int] | None = None  # HTTP requests to each encoder server, warm-up excluded
    front_end: dict[str, Any] | None = None  # this process's CPU time per query (benchmarks/front_end.py)
    twin_lag_s: float | None = None  # on twins: how far they fell behind their model during this run (twin_run.py)
    twin_lag_by_twin_s: dict[str, float] | None = None  # the same lag, each twin's own ("llm", "embed", "rerank")
    twin_cpu_s: float | None = None  # on twins: the CPU their process spent during this run (twin_run.py)
    twin_busy_s: dict[str, float] | None = None  # on twins: each one's modelled busy seconds in this run, and "llm_steps"
    spans: list[dict[str, Any]] | None = None  # accel's primitive spans in the window, where asked (span_timeline.py)
    llm_steps: dict[str, Any] | None = None  # on twins: the LLM's steps in the window, summarised (llm_steps.py)
    llm_step_rows: dict[str, Any] | None = None  # those steps themselves, where asked (`--steps`)

    @property
    def ok(self) -> bool:
        return self.setup_error is None and not self.errors


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _timed(driver: Driver, app: Any, question: str, clock: Callable[[], float] = time.perf_counter) -> tuple[float, str | None, str | None]:
    start = clock()
    try:
        text: str | None = driver.call(app, question)
        error = None
    except Exception as exc:  # a failing query is a result, not a crash of the harness
        text, error = None, _describe(exc)
    return clock() - start, text, error


def _alone(driver: Driver, app: Any, question: str) -> tuple[tuple[float, str | None, str | None], list[float],
                                                               list[CallUsage | None], QuerySpans | None]:
    """One query run alone, its LLM call durations and their usage (none where it failed): its
    own critical path, for the batch and Poisson bounds, and its calls' tokens, for the step
    floor; and when it ran (`QuerySpans`)."""
    offset = time.monotonic() - time.perf_counter()  # the timer's perf_counter stamps, on the monotonic clock
    with driver.timing() as timer:
        start = time.monotonic()
        result = _timed(driver, app, question)
        end = time.monotonic()
    if result[2] is not None:
        return result, [], [], None
    llm = tuple((began + offset, ended + offset) for began, ended in timer.spans())
    return result, timer.durations(), timer.usage(), QuerySpans(start, end, llm)


def _record(run: SystemRun, results: Sequence[tuple[float | None, str | None, str | None]]) -> SystemRun:
    for latency, text, error in results:
        run.latencies.append(latency if error is None else None)
        run.outputs.append(text)
        if error is not None:
            run.errors.append(error)
    return run


def run_single(driver: Driver, app: Any, questions: Sequence[str], run: SystemRun) -> SystemRun:
    start = time.perf_counter()
    results = [_timed(driver, app, question) for question in questions]
    run.makespan_s = time.perf_counter() - start
    return _record(run, results)


def run_batch(driver: Driver, app: Any, questions: Sequence[str], run: SystemRun, system: System, concurrency: int) -> SystemRun:
    """A concurrent system's batch; a sequential one's queries one by one, each query's LLM
    calls timed (`run.llm_calls`: every query's lone critical path, for the batch bound)."""
    start = time.perf_counter()
    if not system.concurrent:
        results = []
        for q in questions:
            result, calls, usage, spans = _alone(driver, app, q)
            results.append(result)
            run.llm_calls.append(calls)
            run.llm_usage.append(usage)
            run.lone_spans.append(spans)
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
    """Each query released at its arrival; a sequential system's one worker runs them one by one,
    so each query is alone, and its LLM calls are timed (`run.llm_calls`, in query order: each
    query's own critical path, for the Poisson bound)."""
    workers = concurrency if system.concurrent else 1
    start = time.perf_counter()
    lone: dict[int, list[float]] = {}

    def serve(i: int, question: str, due: float) -> tuple[float, str | None, str | None]:
        if system.concurrent:
            _, text, error = _timed(driver, app, question)
        else:
            (_, text, error), lone[i], _, _ = _alone(driver, app, question)
        return time.perf_counter() - due, text, error

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"bench-{system.name}") as pool:
        futures = []
        for i, (question, offset) in enumerate(zip(questions, arrivals)):
            # the load generator's clock: release each query at its arrival time
            time.sleep(max(0.0, start + offset - time.perf_counter()))
            futures.append(pool.submit(serve, i, question, start + offset))
        results = [f.result() for f in futures]
    run.makespan_s = time.perf_counter() - start
    if not system.concurrent:
        run.llm_calls = [lone.get(i, []) for i in range(len(questions))]
    return _record(run, results)


@contextmanager
def settled_heap() -> Iterator[None]:
    """A measured window on a settled heap: everything collected, then what survives frozen, so
    that no collection inside the window scans the objects that earlier systems and the setup
    left (a full collection of this process's heap, stock and wrapped apps and models' Python
    objects, took up to 0.47 s). Unfrozen when the window ends: the next window's collection
    frees what this one left, and nothing stays frozen at exit (extensions that check for
    leaked objects at shutdown, triton's nanobind, would report the frozen ones)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _setup(system: System, apps: Apps, driver: Driver, run: SystemRun, before: Callable[[], None]) -> Any:
    """Build the system's app and warm it up with one query outside the workload; None (and
    `run.setup_error` set) when that fails."""
    try:
        app = system.build(apps)
        before()
        driver.call(app, WARMUP_QUESTION)
    except Exception as exc:
        run.setup_error = _describe(exc) + "\n" + traceback.format_exc(limit=3)[-800:]
        return None
    return app


def run_rounds(systems: Sequence[System], apps: Apps, driver: Driver, questions: Sequence[str], *,
               before: Callable[[], None] = lambda: None, timed: str = "",
               after_round: Callable[[int, list[float] | None], None] = lambda i, calls: None,
               clock: Callable[[], float] = time.perf_counter) -> dict[str, SystemRun]:
    """Single mode in rounds: query i on every system in turn (the first one rotating, so no
    system always finds the server's prefix cache warm from another), then `after_round(i,
    LLM call durations of system `timed` on query i, None if it failed or did not run)`.
    `clock`: injectable, so a test can run fake engines on a virtual clock."""
    runs = {s.name: SystemRun(s.name, "single") for s in systems}
    apps_of = {s.name: app for s in systems if (app := _setup(s, apps, driver, runs[s.name], before)) is not None}
    ready = list(apps_of)
    busy = dict.fromkeys(ready, 0.0)
    with settled_heap():
        for i, question in enumerate(questions):
            calls: list[float] | None = None
            shift = i % len(ready) if ready else 0
            for name in ready[shift:] + ready[:shift]:
                before()
                if name != timed:
                    result = _timed(driver, apps_of[name], question, clock)
                else:
                    with driver.timing() as timer:
                        result = _timed(driver, apps_of[name], question, clock)
                    runs[name].llm_calls.append(timer.durations())
                    calls = timer.durations() if result[2] is None else None
                busy[name] += result[0]
                _record(runs[name], [result])
            after_round(i, calls)
    for name in ready:
        runs[name].makespan_s = busy[name]  # its own queries' time: the rounds interleave the systems
    return runs


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
    warmed: Callable[[], None] = lambda: None,
) -> SystemRun:
    """Build the system's app, warm it up with one query outside the workload (`before` runs
    before the warm-up, `warmed` after it), run the mode."""
    run = SystemRun(system.name, mode, rate)
    app = _setup(system, apps, driver, run, before)
    if app is None:
        return run
    with settled_heap():
        warmed()
        if mode == "single":
            return run_single(driver, app, questions, run)
        if mode == "batch":
            return run_batch(driver, app, questions, run, system, concurrency)
        return run_poisson(driver, app, questions, arrivals, run, system, concurrency)
