"""Marks the passes put on graphs and the runtime reads: shared vocabulary, so neither layer
imports the other (the layer contracts in `.importlinter`)."""

from __future__ import annotations

LATENCY = "latency"
"""Objective of a node on a query's latency-critical path (Parrot's deduction)."""
THROUGHPUT = "throughput"
"""Objective of a node whose work only feeds a throughput-tolerant consumer (a task group)."""

SHARE_REQUESTS = "share_requests"
"""The pass whose presence in a template's `meta["passes"]` lets a batch call's engine
schedulers compute identical deterministic requests once (`accel.runtime.sharing`)."""
