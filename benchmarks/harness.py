"""One comparison: a workload, an example app of one framework, the selected systems, one mode
(poisson: one run per rate), summarised into the report dict that `report.py` renders.

    report = compare(BenchConfig("advanced-rag", "langchain", "single", queries=8), stack)
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from accel.engines.errors import InvalidRequest

from . import (bounds, encoder_requests, front_end, host_speed, index_names, llm_steps, metrics, prompt_cache, span_timeline,
               spread, twin_run)
from .apps import example
from .capacity_profile import CapacityProbe
from .drivers import driver_for
from .lower_bound import encoder_probe
from .runner import MODES, Mode, SystemRun, run_rounds, run_system
from .systems import ACCEL, BASELINES, LLAMADISTPC, STOCK_CONCURRENT, STOCK_SEQUENTIAL, Apps, select
from .summary import verdict
from .workload import DEFAULT_MODULES, Workload, build_workload

Progress = Callable[[str], None]
DEFAULT_RATES: tuple[float, ...] = (0.25, 0.5, 1.0)


@dataclass(frozen=True)
class BenchConfig:
    example: str
    framework: str
    mode: Mode
    queries: int = 8
    rates: tuple[float, ...] = ()
    systems: tuple[str, ...] = ()  # empty: the baselines and accel-topology (+ ablations)
    ablations: bool = False  # also accel's other policies and each pass switched off
    concurrency: int = 16
    seed: int = 0
    modules: tuple[str, ...] = DEFAULT_MODULES
    max_chars: int = 4000
    twin: str = ""  # the engines are twins of this profile: every number is simulated
    spans: bool = False  # record accel's primitive spans in each accel window (span_timeline.py; costs loop CPU)
    steps: bool = False  # keep the LLM twin's step rows of each window (llm_steps.py), not only their summary

    def check(self) -> None:
        if self.mode not in MODES:
            raise InvalidRequest("bench", f"unknown mode {self.mode!r}", f"use one of {list(MODES)}")
        if self.queries < 1 or self.concurrency < 1:
            raise InvalidRequest("bench", f"queries={self.queries}, concurrency={self.concurrency}", "use positive counts")
        if self.spans and self.mode == "single":
            raise InvalidRequest("bench", "spans are recorded in batch and Poisson windows only (single mode interleaves "
                                 "the systems query by query)", "use --mode batch or --mode poisson with --spans")
        if self.steps and (not self.twin or self.mode == "single"):
            raise InvalidRequest("bench", "an LLM's steps are logged by its twin, in batch and Poisson windows",
                                 "use --twin with --mode batch or --mode poisson for --steps")
        example(self.example).module(self.framework)


def reset_prefix_cache(openai_base_url: str) -> bool:
    """Empty vLLM's prefix cache so no system reuses another one's prompts; only servers
    started with VLLM_SERVER_DEV_MODE=1 offer it. Returns whether it happened."""
    url = openai_base_url.rstrip("/").removesuffix("/v1") + "/reset_prefix_cache"
    try:
        return httpx.post(url, timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


def machine() -> dict[str, Any]:
    """What the numbers were measured on, including how busy the machine was at the start."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(), "gpu": None,
            "load_average_1m_at_start": os.getloadavg()[0]}


@dataclass(frozen=True)
class Indexed:
    """The workload with its documents already in the stack's vector store. Indexing needs
    only the database and the embedder, so it can run while the LLM server starts."""

    workload: Workload
    index: Any
    collection: str = ""
    """The collection (LangChain) or table (LlamaIndex) the documents went into."""
    lease: index_names.NameLease | None = None
    """The run's hold on `collection` (released by `drop_index`)."""


def drop_index(indexed: Indexed, stack: Any) -> None:
    """Remove the workload's collection or table, so repeated benchmarks do not fill the
    user's Postgres with `bench_*` collections (each run indexes afresh, `index_names`)."""
    try:
        _drop(indexed.index, stack)
    finally:
        if indexed.lease is not None:
            indexed.lease.release()


def _drop(index: Any, stack: Any) -> None:
    if index is None:
        return
    if callable(getattr(index, "delete_collection", None)):  # LangChain PGVector
        index.delete_collection()
        return
    store = getattr(index, "vector_store", None)
    if type(store).__name__ == "PGVectorStore":  # LlamaIndex: its rows live in table data_<name>
        import psycopg
        from psycopg import sql

        with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(store.schema_name, f"data_{store.table_name}")))


def index_workload(config: BenchConfig, stack: Any, progress: Progress = lambda _: None) -> Indexed:
    """Build the workload and index its documents (`stack` needs `pg_dsn` and `embed_model`)."""
    config.check()
    spec = example(config.example)
    if spec.workload is not None:  # an example with a workload of its own (repeated questions)
        workload = spec.workload(config.queries, max_chars=config.max_chars, seed=config.seed)
    else:
        workload = build_workload(config.queries, modules=config.modules, max_chars=config.max_chars, seed=config.seed)
    progress(f"indexing {len(workload.documents)} documents")
    module = example(config.example).module(config.framework)
    name = index_names.workload_name(config.example, config.framework, queries=config.queries, seed=config.seed,
                                     modules=config.modules, max_chars=config.max_chars)
    lease = index_names.lease(stack.pg_dsn, name)
    try:
        return Indexed(workload, module.build_index(stack, workload.documents, lease.name), lease.name, lease)
    except BaseException:
        lease.release()
        raise


def _apps(config: BenchConfig, stack: Any, index: Any) -> Apps:
    spec = example(config.example)
    module = spec.module(config.framework)
    return Apps(module.build_app(stack, index, **spec.app_options), module.build_app(stack, index, parallel=True, **spec.app_options))


def compare(config: BenchConfig, stack: Any, progress: Progress = lambda _: None, indexed: Indexed | None = None) -> dict[str, Any]:
    """Run every selected system on the same workload; returns the JSON-ready report.
    `indexed`: the workload indexed beforehand (`index_workload`, its caller drops it), else
    it is indexed here and dropped at the end."""
    config.check()
    systems = select(list(config.systems), ablations=config.ablations)
    if config.mode == "single":
        systems = [s for s in systems if s.name != STOCK_CONCURRENT]  # identical to sequential there
    own = indexed is None
    indexed = indexed or index_workload(config, stack, progress)
    driver = driver_for(config.framework)
    lag_before = twin_run.lag_s(stack) if config.twin else None
    speed_before = host_speed.probe()
    try:
        report = _compare(config, stack, progress, indexed, systems, driver)
        report["machine"]["host_speed"] = host_speed.around(speed_before, host_speed.probe())
        if config.twin:
            report["simulated"] = twin_run.simulated(config.twin, lag_before, twin_run.lag_s(stack))
            report["verdict"] = verdict(report)
        return report
    finally:
        driver.close()
        if own:
            drop_index(indexed, stack)


def _compare(config: BenchConfig, stack: Any, progress: Progress, indexed: Indexed, systems: list[Any], driver: Any) -> dict[str, Any]:
    workload, spec = indexed.workload, example(config.example)
    apps = _apps(config, stack, indexed.index)
    rates = tuple(sorted(config.rates or DEFAULT_RATES)) if config.mode == "poisson" else (None,)
    resets: list[bool] = []

    def reset() -> None:
        resets.append(reset_prefix_cache(stack.openai_base_url))

    chunks = driver.chunks(workload.documents)
    meter = _meter(config, stack, driver, apps, indexed, chunks, reset, progress)
    rounds: list[bounds.Round | None] = []
    if config.mode == "single":
        runs = {name: [run] for name, run in _rounds(config, systems, apps, driver, workload.questions, reset, meter, rounds, progress).items()}
    else:
        runs = _runs(config, systems, apps, driver, workload, rates, reset, stack, meter, rounds, progress)
    runs_at = [{name: rs[i] for name, rs in runs.items() if i < len(rs)} for i in range(len(rates))]
    arrivals = {rate: workload.with_arrivals(rate).arrivals for rate in rates if rate}
    lone = runs_at[-1].get(STOCK_SEQUENTIAL) if runs_at and config.mode != "single" else None  # every query timed alone
    floor = (twin_run.step_floor(config.twin, spec.llm_levels, lone, runs_at[-1].values(), stack)
             if lone and config.twin and config.mode == "batch" else None)
    measured = bounds.Measured(spec, config.mode, config.queries, arrivals, lone.llm_calls if lone else (), floor)
    summary = bounds.settle(measured, rounds, lambda i: meter.round(i % len(workload.questions)), dict(zip(rates, runs_at)),
                            progress=progress)
    report = _report(config, workload.questions, runs_at, stack, all(resets) and bool(resets), measured, summary)
    report["index"] = {"collection": indexed.collection, "chunks": len(chunks),
                       "shared_text_chunks": index_names.shared_text_chunks(chunks)}
    return report


def _meter(config: BenchConfig, stack: Any, driver: Any, apps: Apps, indexed: Indexed, chunks: list[str],
           reset: Callable[[], None], progress: Progress) -> bounds.Meter:
    """The bound's instruments, loaded before the first round (`chunks`: the indexed texts)."""
    spec, questions = example(config.example), indexed.workload.questions

    def time_stock(i: int) -> list[float] | None:
        reset()  # stock's prompts as a lone stock query finds them
        with driver.timing() as timer:
            try:
                driver.call(apps.stock, questions[i])
            except Exception:  # a failing query gives no round; the systems' runs report failures
                return None
        return timer.durations()

    capacity = None if config.mode == "single" else CapacityProbe(spec, stack, questions, chunks, config.queries,
                                                                   twin_run.devices(config.twin) if config.twin else None)
    return bounds.Meter(spec, time_stock, encoder_probe(spec, stack, driver, indexed.index, questions, chunks), capacity, progress)


def _rounds(config: BenchConfig, systems: list[Any], apps: Apps, driver: Any, questions: list[str], reset: Callable[[], None],
            meter: bounds.Meter, rounds: list[bounds.Round | None], progress: Progress) -> dict[str, SystemRun]:
    """Single mode: every system takes its turn on each query, then the bound measures its round."""
    stock_runs = any(s.name == STOCK_SEQUENTIAL for s in systems)

    def after(i: int, calls: list[float] | None) -> None:
        rounds.append(None if stock_runs and calls is None else meter.round(i, calls))
        progress(f"round {i + 2}/{len(questions)}" if i + 1 < len(questions) else "checking the bound against every system")

    progress(f"round 1/{len(questions)}: {len(systems)} systems one query each, then the bound")
    runs = run_rounds(systems, apps, driver, questions, before=reset, timed=STOCK_SEQUENTIAL, after_round=after)
    if any(s.accel for s in systems):
        import accel

        accel.shutdown()
    return runs


def _runs(config: BenchConfig, systems: list[Any], apps: Apps, driver: Any, workload: Workload, rates: tuple[float | None, ...],
          reset: Callable[[], None], stack: Any, meter: bounds.Meter, rounds: list[bounds.Round | None],
          progress: Progress) -> dict[str, list[SystemRun]]:
    """Batch / Poisson: each system's run, with a bound round after each at the highest rate."""
    with encoder_requests.counting(stack) as counter:
        return _counted_runs(config, systems, apps, driver, workload, rates, reset, stack, meter, rounds, progress, counter)


def _counted_runs(config: BenchConfig, systems: list[Any], apps: Apps, driver: Any, workload: Workload,
                  rates: tuple[float | None, ...], reset: Callable[[], None], stack: Any, meter: bounds.Meter,
                  rounds: list[bounds.Round | None], progress: Progress,
                  counter: encoder_requests.RequestCounter | None) -> dict[str, list[SystemRun]]:
    runs: dict[str, list[SystemRun]] = {}
    for rate in rates:
        arrivals = workload.with_arrivals(rate).arrivals if rate else ()
        for system in systems:
            progress(f"{system.name}" + (f" @ {rate}/s" if rate else ""))
            tokens = prompt_cache.counts(stack.openai_base_url)
            sent: list[dict[str, int]] = []
            cpu: list[front_end.CpuSample] = []
            twins: list[twin_run.Reading] = []
            window: list[float] = []

            def warmed() -> None:
                if config.twin:  # first: reading the twins' metrics costs this process CPU the run must not count
                    twins.append(twin_run.read(stack))
                    window.append(time.monotonic())
                if counter is not None:
                    sent.append(counter.counts())
                if recorder is not None:
                    recorder.start(time.time_ns())
                cpu.append(front_end.sample(loop=system.accel))

            with span_timeline.recording() if config.spans and system.accel else nullcontext() as recorder:
                run = run_system(system, apps, driver, workload.questions, config.mode, arrivals=arrivals, rate=rate,
                                 concurrency=config.concurrency, before=reset, warmed=warmed)
                if recorder is not None:
                    run.spans = recorder.rows()
            cpu_after = front_end.sample(loop=system.accel)
            if window:
                _read_steps(run, stack, window[0], time.monotonic(), keep=config.steps)
            if twins:  # this system's own lag and CPU: the run's totals mix every system's
                after = twin_run.read(stack)
                run.twin_lag_s, run.twin_cpu_s = after.since(twins[0])
                run.twin_lag_by_twin_s = after.lag_by_twin_since(twins[0])
                run.twin_busy_s = after.busy_since(twins[0])
            run.front_end = front_end.per_query(cpu[0] if cpu else None, cpu_after, len(workload.questions),
                                                in_process_encoders=_in_process_encoders(stack),
                                                app_loop_busy_s=_app_loop_busy(driver, system, config.mode))
            run.prompt_cache = prompt_cache.delta(tokens, prompt_cache.counts(stack.openai_base_url))
            run.encoder_requests = encoder_requests.delta(counter, sent[0] if sent else None)
            runs.setdefault(system.name, []).append(run)
            if system.accel:
                import accel

                accel.shutdown()  # each accel system starts from fresh sessions and engines
            if rate == rates[-1]:
                progress(f"bound round {len(rounds) + 1}: stock's LLM calls, engine throughputs")
                rounds.append(meter.round(len(rounds) % len(workload.questions)))
    return runs


def _read_steps(run: SystemRun, stack: Any, since: float, until: float, *, keep: bool) -> None:
    """The LLM twin's steps in the run's window: their summary, and the rows where `keep`."""
    steps = llm_steps.fetch(stack.openai_base_url, since, until)
    if steps is not None:
        run.llm_steps = llm_steps.summarise(steps)
        run.llm_step_rows = steps.as_json() if keep else None


def _app_loop_busy(driver: Any, system: Any, mode: str) -> float | None:
    """How long the app's own loop was busy in a concurrent batch (drivers whose apps share one
    loop: LlamaIndex's `gather`), else None."""
    if mode != "batch" or not system.concurrent:
        return None
    return getattr(driver, "loop_busy_s", None)


def _in_process_encoders(stack: Any) -> bool:
    return not (getattr(stack, "embed_base_url", None) and getattr(stack, "rerank_base_url", None))


def _engines(stack: Any) -> dict[str, Any]:
    """Which engines the apps used: in-process encoder models, or the servers they called."""
    engines = {"llm": stack.model, "llm_server": stack.openai_base_url, "embed": stack.embed_model, "rerank": stack.rerank_model}
    if getattr(stack, "embed_base_url", None):
        engines |= {"embed": stack.embed_model_name, "embed_server": stack.embed_base_url}
    if getattr(stack, "rerank_base_url", None):
        engines |= {"rerank": stack.rerank_model_name, "rerank_server": stack.rerank_base_url}
    return engines


def _engine_limits() -> dict[str, Any]:
    """Where accel's engine limits came from: `accel profile`'s saved results in this home (a
    twin's, when the bench runs on twins) or the reference machine's defaults."""
    from accel import profiles

    measured = profiles.load()
    return {"source": measured.source, "llm_peak_batch": measured.llm_batch, "llm_spare": measured.llm_spare,
            "busy_profiles": list(measured.busy)}


def equality_reference(runs: dict[str, SystemRun]) -> SystemRun | None:
    """The answers every system is compared with: stock one query at a time, or, in a run that
    skips it (a 200-query batch would spend most of its time there), stock `batch` / gather."""
    return runs.get(STOCK_SEQUENTIAL) or runs.get(STOCK_CONCURRENT)


def _report(config: BenchConfig, questions: list[str], runs_at: list[dict[str, SystemRun]], stack: Any, reset: bool,
            measured: bounds.Measured, summary: dict[str, Any]) -> dict[str, Any]:
    per_rate: list[dict[str, Any]] = []
    for at in runs_at:
        reference = equality_reference(at)
        per_rate.append({
            "rate": next(iter(at.values())).rate if at else None,
            "systems": {name: metrics.summarize(run, reference) for name, run in at.items()},
            "speedup_vs_stock": metrics.speedups(at, STOCK_SEQUENTIAL, config.mode),
            "speedup_vs_stock_concurrent": metrics.speedups(at, STOCK_CONCURRENT, config.mode),
            "speedup_vs_llamadistpc": metrics.speedups(at, LLAMADISTPC, config.mode),
            "speedup_spread": {"vs_stock": spread.speedup_spreads(at, STOCK_SEQUENTIAL, config.mode),
                               "vs_stock_concurrent": spread.speedup_spreads(at, STOCK_CONCURRENT, config.mode)},
        })
    main = max(per_rate, key=lambda r: r["rate"] or 0)  # poisson: the highest (most loaded) rate
    report: dict[str, Any] = {
        "example": config.example,
        "framework": config.framework,
        "mode": config.mode,
        "headline_metric": {"single": "mean latency", "batch": "makespan", "poisson": "p95 latency"}[config.mode],
        "config": {k: v for k, v in asdict(config).items() if k not in ("modules",)} | {"modules": list(config.modules)},
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(),
        "engines": _engines(stack),
        "engine_limits": _engine_limits(),
        "prefix_cache_reset_between_systems": reset,
        "questions": questions,
        "equality_reference": next((name for name in (STOCK_SEQUENTIAL, STOCK_CONCURRENT) if name in runs_at[-1]), None),
        "baselines": list(BASELINES),
        "latency": {name: s["latency"] for name, s in main["systems"].items()},
        "equal_rate": {name: s["equal_rate"] for name, s in main["systems"].items()},
        "throughput_qps": {name: s["throughput_qps"] for name, s in main["systems"].items()},
        "speedup_vs_stock": main["speedup_vs_stock"],
        "speedup_vs_stock_concurrent": main["speedup_vs_stock_concurrent"],
        "speedup_vs_llamadistpc": main["speedup_vs_llamadistpc"],
        "speedup_spread": main["speedup_spread"],
        "systems": main["systems"],
        "rates": per_rate if config.mode == "poisson" else [],
        "lower_bound": None,
        "capacity_bound": None,
    }
    bounds.attach(report, measured, summary, runs_at, ACCEL)
    report["verdict"] = verdict(report)
    return report
