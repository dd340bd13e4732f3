"""The bound every mode reports, and accel's distance from it.

- single: the critical-path bound of a lone query (`lower_bound.py`), against mean latency;
- batch: the capacity bound (`capacity_bound.py`), against the makespan;
- poisson: the capacity bound's per-query latencies for the run's arrivals, against p95.

Both come from one set of measurements: the stock app's LLM calls timed one query at a time
(the single-mode stock run, or a few stock queries timed here), the non-LLM steps of the
critical path, and, for batch and Poisson runs, each engine's throughput vs batch size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import metrics
from .apps import ExampleSpec
from .capacity_bound import EngineWork, capacity_bound, online_bound
from .capacity_profile import profile_work
from .lower_bound import lower_bound, profile_steps
from .runner import SystemRun, run_single
from .workload import Workload

TIMED_STOCK_QUERIES = 4
KIND = {"single": "critical-path", "batch": "capacity", "poisson": "capacity"}


def stock_llm_calls(runs: dict[str, list[SystemRun]], stock_name: str, driver: Any, stock_app: Any,
                    questions: Sequence[str], progress: Any) -> list[list[float]]:
    """Per-query LLM call durations of stock run one query at a time: from the run when it
    timed them (single mode), else from a few stock queries timed now (no other load)."""
    timed = [run for run in runs.get(stock_name, []) if run.llm_calls]
    if timed:
        return timed[0].llm_calls
    progress(f"bound: timing stock's LLM calls ({min(len(questions), TIMED_STOCK_QUERIES)} queries, one at a time)")
    run = run_single(driver, stock_app, list(questions[:TIMED_STOCK_QUERIES]), SystemRun(stock_name, "single"), time_llm=True)
    return [calls for calls, latency in zip(run.llm_calls, run.latencies) if latency is not None]


def measure(spec: ExampleSpec, mode: str, stack: Any, workload: Workload, rates: Sequence[float | None],
            llm_calls: list[list[float]], chunks: Sequence[str], progress: Any) -> dict[str, Any]:
    """The bounds of this run: `critical_path` always, `work` (per-engine) for batch / Poisson."""
    progress("bound: profiling the non-LLM steps of the critical path")
    steps = profile_steps(spec, stack, workload.questions, chunks)
    critical = lower_bound(spec, llm_calls, steps)
    out: dict[str, Any] = {"critical_path": critical, "work": None}
    if mode != "single" and llm_calls:
        llm_s = sum(sum(calls) for calls in llm_calls) / len(llm_calls)
        out["work"] = profile_work(spec, stack, workload.questions, chunks, llm_s, progress)
    out["arrivals"] = {rate: workload.with_arrivals(rate).arrivals for rate in rates if rate}
    return out


def _ratio(value: float | None, bound: float | None) -> float | None:
    return value / bound if value and bound else None


def attach(report: dict[str, Any], measured: dict[str, Any], runs_at: list[dict[str, SystemRun]], accel_name: str) -> None:
    """Write `lower_bound`, `capacity_bound` and the uniform `bound` into the report."""
    mode = report["mode"]
    critical = measured["critical_path"]
    cp_mean = critical.get("mean_s")
    accel_summary = report["systems"].get(accel_name) or {}
    critical["accel_over_bound"] = _ratio((accel_summary.get("latency") or {}).get("mean"), cp_mean) if mode == "single" else None
    report["lower_bound"] = critical
    work: list[EngineWork] | None = measured["work"]
    value = None
    if mode == "single":
        value = cp_mean
    elif work and mode == "batch":
        cap = capacity_bound(work, report["config"]["queries"], cp_mean)
        cap["accel_over_bound"] = _ratio(accel_summary.get("makespan_s"), cap["makespan_s"])
        report["capacity_bound"] = cap
        value = cap["makespan_s"]
    elif work and mode == "poisson":
        cap = capacity_bound(work, report["config"]["queries"], cp_mean)
        cap["rates"] = []
        for at, runs in zip(report["rates"], runs_at):
            per_query = online_bound(work, measured["arrivals"][at["rate"]], cp_mean or 0.0)
            p95 = metrics.percentile(per_query, 95)
            accel_run = runs.get(accel_name)
            accel_p95 = (metrics.latency_stats(accel_run) or {}).get("p95") if accel_run else None
            entry = {"rate": at["rate"], "p95_s": p95, "mean_s": sum(per_query) / len(per_query),
                     "accel_over_bound": _ratio(accel_p95, p95)}
            cap["rates"].append(entry)
            at["bound_p95_s"] = p95
        main = max(cap["rates"], key=lambda e: e["rate"])
        cap["accel_over_bound"] = main["accel_over_bound"]
        report["capacity_bound"] = cap
        value = main["p95_s"]
    accel_value = metrics_value(accel_summary, mode)
    report["bound"] = {"kind": KIND[mode], "metric": report["headline_metric"], "value_s": value,
                       "system": accel_name, "accel_over_bound": _ratio(accel_value, value)}


def metrics_value(summary: dict[str, Any], mode: str) -> float | None:
    """The headline number of one system's summary: mean latency, makespan or p95."""
    if not summary or summary.get("setup_error"):
        return None
    if mode == "batch":
        return summary.get("makespan_s")
    return (summary.get("latency") or {}).get("p95" if mode == "poisson" else "mean")
