"""The bound every mode reports, measured inside the run, and accel's distance from it.

- single: the critical-path bound of a lone query (`lower_bound.py`), against mean latency;
- batch: the capacity bound (`capacity_bound.py`), never below the longest query's own critical
  path (every query timed alone in stock-sequential's run), nor, on engine twins, below the
  step floor of the run's LLM calls (`step_floor.py`), against the makespan;
- poisson: the capacity bound's per-query latencies for the run's arrivals, each never below
  that query's own critical path (timed alone in stock-sequential's run), against p95.

Bound rounds are interleaved with the systems' own (`Meter`): single mode measures one after
each round of queries, batch and Poisson one after each system's run at the highest rate. A
bound above any system's measured headline is a measurement failure, not a result (`settle`):
the rounds are measured again, each keeping its lower value, until the bound holds or the time
budget is spent; then the bound is "not established" and no accel / bound ratio is reported.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from . import metrics
from .apps import ExampleSpec
from .capacity_bound import EngineWork, capacity_bound, online_bound
from .capacity_profile import CapacityProbe
from .lower_bound import BoundRound, Clock, StepProbe, llm_path, lower_bound, spread
from .runner import SystemRun
from .spread import STATS, ratio_spread, samples

log = logging.getLogger("accel.benchmarks.bounds")
KIND = {"single": "critical-path", "batch": "capacity", "poisson": "capacity"}
BUDGET_S = 120.0  # re-measuring a bound that came out above a measured system
MAX_PASSES = 3
ROUNDING = 1e-9  # relative: a system exactly on the bound (a virtual clock's sums) is no violation


@dataclass(frozen=True)
class CapacityRound:
    """One capacity round: the critical path of one query and each engine's work, measured together."""

    critical: BoundRound
    work: list[EngineWork]


Round = BoundRound | CapacityRound


class Meter:
    """Measures bound rounds in the conditions of the run: stock's LLM calls of query i (taken
    from the round's own stock run, else timed now), the critical path's other steps and, for
    batch / Poisson, each engine's throughput."""

    def __init__(self, spec: ExampleSpec, time_stock: Callable[[int], list[float] | None], probe: StepProbe,
                 capacity: CapacityProbe | None = None, progress: Callable[[str], None] = lambda _: None) -> None:
        self.spec, self.time_stock, self.probe, self.capacity, self.progress = spec, time_stock, probe, capacity, progress

    def round(self, query: int, llm_calls: Sequence[float] | None = None) -> Round | None:
        calls = list(llm_calls) if llm_calls is not None else self.time_stock(query)
        if calls is None:  # stock failed this query: no round
            return None
        critical = BoundRound(query, tuple(calls), self.probe.time(query))
        if self.capacity is None:
            return critical
        width = max(self.spec.llm_levels(len(calls)), default=1)
        return CapacityRound(critical, self.capacity.work(sum(calls), width, self.progress))


@dataclass(frozen=True)
class Measured:
    """What one mode measures of its rounds and checks against the systems' headlines."""

    spec: ExampleSpec
    mode: str
    queries: int
    arrivals: dict[float, Sequence[float]]  # Poisson: each rate's arrival offsets
    lone_llm_calls: Sequence[Sequence[float]] = ()
    """Batch and Poisson: stock's LLM call durations of every query of the run, in query order,
    each query run alone (stock-sequential's run, timed); a query's entry is empty where it
    failed, the whole sequence where stock-sequential did not run."""
    step_floor: dict[str, Any] | None = None
    """Batch on engine twins: what no schedule of the run's LLM calls beats on the twin's step
    model (`step_floor.run_floor`; its `value_s`); no round of the batch bound lies below it."""

    def key(self, r: Round) -> float:
        """The value a re-measured round must beat to replace the old one."""
        if isinstance(r, BoundRound):
            return r.value(self.spec)
        return capacity_bound(r.work, self.queries, r.critical.value(self.spec))["makespan_s"]

    def summary(self, rounds: Sequence[Round | None]) -> dict[str, Any]:
        done = [r for r in rounds if r is not None]
        if self.mode == "single":
            return lower_bound(self.spec, [r for r in done if isinstance(r, BoundRound)])
        caps = [r for r in done if isinstance(r, CapacityRound)]
        caps.sort(key=self.key)
        lone = self.lone(caps)
        longest = lone["longest_s"] if lone else 0.0
        floor = self.step_floor["value_s"] if self.step_floor else 0.0
        out = {"critical_path": lower_bound(self.spec, [r.critical for r in caps]), "lone_queries": lone,
               "step_floor": self.step_floor,
               "per_round_s": [max(self.key(r), longest, floor) for r in caps],
               "engines": [asdict(w) for w in caps[len(caps) // 2].work] if caps else []}
        if self.mode == "batch":
            return out | spread(out["per_round_s"])
        own = self.paths(caps)
        out["rates"] = {rate: [metrics.percentile(online_bound(r.work, arrivals, self.floors(r, own, len(arrivals))), 95)
                               for r in caps]
                        for rate, arrivals in self.arrivals.items()}
        return out

    def paths(self, caps: Sequence[CapacityRound]) -> list[float | None]:
        """Each query's own critical path, in query order: its lone LLM calls by level, plus
        the rounds' median non-LLM steps; None for a query that failed alone (or all None
        where no query was run alone)."""
        if not caps or not any(self.lone_llm_calls):
            return [None] * len(self.lone_llm_calls)
        steps = _steps(caps)
        return [llm_path(c, self.spec.llm_levels(len(c))) + steps if c else None for c in self.lone_llm_calls]

    def floors(self, r: CapacityRound, own: Sequence[float | None], queries: int) -> list[float]:
        """Poisson: the i-th arrival's latency floor, its query's own critical path where it
        was run alone, else the round's query's. A round times one query, whose path stood
        for every arrival before: too high for queries with shorter answers, too low for
        longer ones (the rounds' p95 bounds of one run spread 0.98-1.30 s on the twins)."""
        fallback = r.critical.value(self.spec)
        return [fallback if path is None else path for path in [*own, *[None] * queries][:queries]]

    def lone(self, caps: Sequence[CapacityRound]) -> dict[str, Any] | None:
        """The queries' own critical paths (`paths`) in brief. No batch ends before its longest
        query could alone; the rounds time a few queries, and a batch's slowest (its longest
        answers) sets the makespan. In Poisson runs each query's own path is its floor."""
        paths = [p for p in self.paths(caps) if p is not None]
        if not paths:
            return None
        return {"queries": len(paths), "longest_s": max(paths), "median_s": statistics.median(paths),
                "steps_s": _steps(caps)}

    def value(self, summary: dict[str, Any], rate: float | None = None) -> float | None:
        """The bound's headline: the systems' statistic over rounds (mean of a single run's
        queries), the median makespan / p95 of capacity rounds (systems measure one of each)."""
        if self.mode == "single":
            return summary["mean_s"]
        if self.mode == "batch":
            return summary["median_s"]
        values = summary["rates"].get(rate) or []
        return statistics.median(values) if values else None

    def violations(self, summary: dict[str, Any], runs_at: dict[float | None, dict[str, SystemRun]]) -> list[dict[str, Any]]:
        """Every system whose measured headline is below the bound (at any rate)."""
        found = []
        for rate, runs in runs_at.items():
            bound = self.value(summary, rate)
            for name, run in runs.items():
                measured = metrics.headline(run, self.mode)
                if bound is not None and measured is not None and measured < bound * (1 - ROUNDING):
                    found.append({"system": name, "rate": rate, "measured_s": measured, "bound_s": bound})
        return found


def _steps(caps: Sequence[CapacityRound]) -> float:
    """The rounds' median time of a query's non-LLM steps (embedding, search, rerank)."""
    return statistics.median(sum(r.critical.steps.values()) for r in caps)


def settle(measured: Measured, rounds: list[Round | None], meter: Callable[[int], Round | None],
           runs_at: dict[float | None, dict[str, SystemRun]], *, budget_s: float = BUDGET_S,
           clock: Clock = time.perf_counter, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Enforce bound <= every measured system: re-measure the rounds (each keeps its lower
    value) within `budget_s` until it holds. Returns the summary with `established`,
    `remeasured` (passes) and the `violations` left."""
    began, passes = clock(), 0
    summary = measured.summary(rounds)
    found = measured.violations(summary, runs_at)
    while found and passes < MAX_PASSES and clock() - began < budget_s:
        passes += 1
        names = sorted({v["system"] for v in found})
        log.warning("bound above the measured %s: re-measuring (pass %d)", ", ".join(names), passes)
        progress(f"bound above the measured {', '.join(names)}: re-measuring (pass {passes})")
        for i, old in enumerate(rounds):
            if clock() - began >= budget_s:
                break
            new = meter(old.critical.query if isinstance(old, CapacityRound) else old.query if old else i)
            if new is not None and (old is None or measured.key(new) < measured.key(old)):
                rounds[i] = new
        summary = measured.summary(rounds)
        found = measured.violations(summary, runs_at)
    if found:
        log.warning("bound not established: %s", found)
    return summary | {"established": not found, "remeasured": passes, "violations": found}


def _ratio(value: float | None, bound: float | None) -> float | None:
    return value / bound if value and bound else None


def attach(report: dict[str, Any], measured: Measured, summary: dict[str, Any], runs_at: list[dict[str, SystemRun]],
           accel_name: str) -> None:
    """Write `lower_bound`, `capacity_bound` and the uniform `bound` into the report (`runs_at`:
    the runs of each rate, in the order of `report["rates"]`; one entry outside Poisson mode).
    A bound not established gets no accel / bound ratio."""
    mode, ok = report["mode"], summary["established"]
    accel = (runs_at[-1] if runs_at else {}).get(accel_name)
    accel_value = metrics.headline(accel, mode) if accel is not None else None
    top = max(measured.arrivals, default=None)
    value = measured.value(summary, top)
    ratio = _ratio(accel_value, value) if ok else None
    if mode == "single":  # the bound's rounds line up with the queries: a paired spread
        by_query = dict(zip(summary["queries"], summary["per_query_s"]))
        rounds: list[float | None] = [by_query.get(i) for i in range(len(accel.latencies) if accel else 0)]
        report["lower_bound"] = summary | {"accel_over_bound": ratio}
    else:
        rounds = list(summary["per_round_s"] if mode == "batch" else summary["rates"].get(top, []))
        report["lower_bound"] = summary["critical_path"] | {"accel_over_bound": None}
        report["capacity_bound"] = {k: v for k, v in summary.items() if k != "critical_path"} | {
            "queries": measured.queries, "makespan_s": value if mode == "batch" else None,
            "critical_path_s": summary["critical_path"]["mean_s"], "accel_over_bound": ratio}
        for at in report.get("rates") or []:
            at["bound_p95_s"] = measured.value(summary, at["rate"])
    done = [v for v in rounds if v is not None]
    report["bound"] = {
        "kind": KIND[mode], "metric": report["headline_metric"], "value_s": value, "established": ok,
        "min_s": min(done, default=None), "median_s": statistics.median(done) if done else None, "rounds": len(done),
        "remeasured": summary["remeasured"], "violations": summary["violations"], "system": accel_name,
        "accel_over_bound": ratio,
        "accel_over_bound_spread": ratio_spread(samples(accel, mode), rounds, STATS[mode],
                                                den_stat=STATS["single"] if mode == "single" else statistics.median) if ok else None,
    }
