"""Latency statistics, throughput, output equality and speedup ratios of system runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from . import span_timeline
from .runner import SystemRun


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty sequence."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def latency_stats(run: SystemRun) -> dict[str, float] | None:
    done = [x for x in run.latencies if x is not None]
    if not done:
        return None
    return {
        "mean": sum(done) / len(done),
        "p50": percentile(done, 50),
        "p95": percentile(done, 95),
        "p99": percentile(done, 99),
        "max": max(done),
    }


def throughput(run: SystemRun) -> float | None:
    done = sum(1 for x in run.latencies if x is not None)
    return done / run.makespan_s if run.makespan_s and done else None


def equal_rate(run: SystemRun, reference: SystemRun | None) -> float | None:
    """Share of queries whose answer equals the reference's (stock sequential); a failed query
    counts as unequal. None when there is no reference answer to compare with."""
    if reference is None or not reference.outputs or run.setup_error is not None:
        return None
    pairs = list(zip(run.outputs, reference.outputs))
    return sum(1 for a, b in pairs if a is not None and a == b) / len(pairs) if pairs else None


def headline(run: SystemRun, mode: str) -> float | None:
    """The number a mode compares: mean latency (single), makespan (batch), p95 (poisson)."""
    stats = latency_stats(run)
    if run.setup_error is not None or stats is None:
        return None
    if mode == "batch":
        return run.makespan_s
    return stats["p95"] if mode == "poisson" else stats["mean"]


def speedups(runs: dict[str, SystemRun], baseline: str, mode: str) -> dict[str, float | None]:
    """baseline's headline number over each system's (higher is better for the system)."""
    base = runs.get(baseline)
    base_value = headline(base, mode) if base else None
    out: dict[str, float | None] = {}
    for name, run in runs.items():
        value = headline(run, mode)
        out[name] = base_value / value if base_value and value else None
    return out


def summarize(run: SystemRun, reference: SystemRun | None) -> dict[str, Any]:
    return {
        "ok": run.ok,
        "setup_error": run.setup_error,
        "errors": run.errors[:5],
        "failed_queries": len(run.errors),
        "latency": latency_stats(run),
        "makespan_s": run.makespan_s,
        "throughput_qps": throughput(run),
        "equal_rate": equal_rate(run, reference),
        "prompt_cache": run.prompt_cache,
        "encoder_requests": run.encoder_requests,
        "front_end": run.front_end,
        "twin_lag_s": run.twin_lag_s,
        "twin_lag_by_twin_s": run.twin_lag_by_twin_s,
        "twin_cpu_s": run.twin_cpu_s,
        "twin_busy_s": run.twin_busy_s,
        "llm_steps": run.llm_steps,
        **({} if run.llm_step_rows is None else {"llm_step_rows": run.llm_step_rows}),
        **({} if run.spans is None else {"timeline": {"nodes": span_timeline.by_node(run.spans), "spans": run.spans}}),
    }
