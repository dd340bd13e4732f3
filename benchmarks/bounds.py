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
    """Write `lower_bound`, `capacity_bound` and the uniform `bound` into the report (`runs_at`:
    the runs of each rate, in the order of `report["rates"]`; one entry outside Poisson mode)."""
    mode, queries = report["mode"], report["config"]["queries"]
    critical, work = measured["critical_path"], measured["work"]
    cp_mean = critical.get("mean_s")
    accel_value = _headline(runs_at[-1], accel_name, mode) if runs_at else None
    critical["accel_over_bound"] = _ratio(accel_value, cp_mean) if mode == "single" else None
    report["lower_bound"] = critical
    value = cp_mean if mode == "single" else None
    if work and mode == "batch":
        cap = capacity_bound(work, queries, cp_mean)
        value = cap["makespan_s"]
        cap["accel_over_bound"] = _ratio(accel_value, value)
        report["capacity_bound"] = cap
    elif work and mode == "poisson":
        cap = capacity_bound(work, queries, cp_mean)
        cap["rates"] = [_online(work, at, runs, measured["arrivals"][at["rate"]], cp_mean, accel_name)
                        for at, runs in zip(report["rates"], runs_at)]
        value = cap["rates"][-1]["p95_s"]  # the highest rate, as the headline
        cap["accel_over_bound"] = cap["rates"][-1]["accel_over_bound"]
        report["capacity_bound"] = cap
    report["bound"] = {"kind": KIND[mode], "metric": report["headline_metric"], "value_s": value,
                       "system": accel_name, "accel_over_bound": _ratio(accel_value, value)}


def _online(work: list[EngineWork], at: dict[str, Any], runs: dict[str, SystemRun], arrivals: Sequence[float],
            cp_mean: float | None, accel_name: str) -> dict[str, Any]:
    """One rate of a Poisson run: the capacity bound's p95 latency, also written into `at`."""
    per_query = online_bound(work, arrivals, cp_mean or 0.0)
    p95 = metrics.percentile(per_query, 95)
    at["bound_p95_s"] = p95
    return {"rate": at["rate"], "p95_s": p95, "mean_s": sum(per_query) / len(per_query),
            "accel_over_bound": _ratio(_headline(runs, accel_name, "poisson"), p95)}


def _headline(runs: dict[str, SystemRun], name: str, mode: str) -> float | None:
    run = runs.get(name)
    return metrics.headline(run, mode) if run is not None else None
