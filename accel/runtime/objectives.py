"""What the engine schedulers do with Parrot's deduced objectives (`accel.passes.objectives`).

A node marked latency-critical (the final decode and what it directly waits on) is admitted
before any other waiting work, across queries, oldest first, and its LLM requests carry a
priority `LATENCY_PRIORITY` ahead of the rest (vLLM schedules lower values first when the
server runs with `--scheduling-policy priority`). Throughput-marked nodes (a task group: map
steps, experts) and unmarked ones are batched as the policy always does. Switching the pass off
(`disabled_passes=["deduce_objectives"]`) leaves every request unmarked: the ablation.
"""

from __future__ import annotations

from accel.ir.marks import LATENCY, THROUGHPUT

__all__ = ["LATENCY", "LATENCY_PRIORITY", "THROUGHPUT", "priority_offset"]

LATENCY_PRIORITY = -100
"""Added to a latency-critical LLM request's priority: more than any graph depth, so the final
decode of a query never waits behind another query's map work inside the engine."""


def priority_offset(objective: str | None) -> int:
    return LATENCY_PRIORITY if objective == LATENCY else 0
