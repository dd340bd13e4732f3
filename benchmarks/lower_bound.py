"""The critical-path lower bound of one query: what a lone query could take if every
independent step ran side by side and nothing waited for anything but its inputs.

LLM calls are timed in the stock single-query run (no other load), grouped by the example's
dependency levels (a level costs its slowest call); non-LLM primitives on the path are costed
from the engines' saved batch profiles. accel latency / bound says how close to the limit a
system gets (1.0 is the limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accel.engines.profile import EngineProfile

from .apps import ExampleSpec, ProfileStep


def profile_cost(step: ProfileStep, directory: Path | None = None) -> float | None:
    """Seconds for one `run` of `step.batch` items, interpolated between profile points;
    None when that profile was never measured (`accel profile`)."""
    path = EngineProfile.default_path(step.engine, step.label)
    if directory is not None:
        path = directory / path.name
    if not path.exists():
        return None
    points = sorted(EngineProfile.load(path).points, key=lambda p: p.batch_size)
    for low, high in zip(points, points[1:]):
        if low.batch_size <= step.batch <= high.batch_size:
            share = (step.batch - low.batch_size) / (high.batch_size - low.batch_size)
            return low.latency_s + share * (high.latency_s - low.latency_s)
    nearest = points[0] if step.batch < points[0].batch_size else points[-1]
    return nearest.latency_s * step.batch / nearest.batch_size if step.batch > nearest.batch_size else nearest.latency_s


def llm_path(durations: Sequence[float], levels: Sequence[int]) -> float:
    """Sum over dependency levels of the slowest call in each level."""
    total, at = 0.0, 0
    for size in levels:
        group = durations[at:at + size]
        if group:
            total += max(group)
        at += size
    return total


def lower_bound(spec: ExampleSpec, per_query_llm: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Per-query bounds from each query's LLM call durations, plus the profiled steps."""
    steps = {f"{s.engine}/{s.label}@{s.batch}": profile_cost(s) for s in spec.profile_steps}
    fixed = sum(v for v in steps.values() if v is not None)
    bounds = [llm_path(calls, spec.llm_levels(len(calls))) + fixed for calls in per_query_llm]
    return {
        "per_query_s": bounds,
        "mean_s": sum(bounds) / len(bounds) if bounds else None,
        "llm_calls_per_query": [len(c) for c in per_query_llm],
        "profiled_steps_s": steps,
    }
