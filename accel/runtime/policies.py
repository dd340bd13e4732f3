"""Batch-forming policies: pure functions from a queue of node tasks to the next batch.

- `topology` (default, Teola Algorithm 2): bucket the queue by query, order buckets by their
  earliest arrival, and take each bucket's deepest nodes first, so every waiting query advances
  along its critical path. Unlike the prototype, depth here is the longest path to the output
  (siblings share it and batch together), and once every bucket's deepest level is in, free
  slots are filled with the next level rather than left idle.
- `po` (per-invocation): one node's requests per batch, oldest node first.
- `to` (throughput-oriented): FIFO dynamic batching across nodes up to the limit.

A policy never mutates the queue; the engine scheduler applies the returned slices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from accel.runtime.task import EngineTask, Slice

PolicyName = Literal["topology", "po", "to"]
Policy = Callable[[Iterable[EngineTask], int], list[Slice]]


def _take(task: EngineTask, slots: int) -> Slice:
    n = min(slots, task.pending)
    return Slice(task, task.taken, task.taken + n)


def topology_batch(queue: Iterable[EngineTask], limit: int) -> list[Slice]:
    """Teola's topology-aware batching with work-conserving fill of lower depth levels."""
    buckets: dict[str, list[EngineTask]] = {}
    for task in queue:
        if task.pending:
            buckets.setdefault(task.query_id, []).append(task)
    ordered = sorted(
        buckets.values(),
        key=lambda tasks: (min(t.priority for t in tasks), min(t.arrival or 0.0 for t in tasks)),
    )
    levels: list[list[list[EngineTask]]] = []
    for tasks in ordered:
        by_depth: dict[int, list[EngineTask]] = {}
        for task in sorted(tasks, key=lambda t: (-t.depth, t.arrival or 0.0)):
            by_depth.setdefault(task.depth, []).append(task)
        levels.append(list(by_depth.values()))
    batch: list[Slice] = []
    slots = limit
    for level in range(max((len(b) for b in levels), default=0)):
        for bucket in levels:
            if level >= len(bucket):
                continue
            for task in bucket[level]:
                if slots == 0:
                    return batch
                piece = _take(task, slots)
                batch.append(piece)
                slots -= piece.size
    return batch


def per_invocation_batch(queue: Iterable[EngineTask], limit: int) -> list[Slice]:
    """PO: the oldest node alone (its requests up to the limit)."""
    waiting = [t for t in queue if t.pending]
    if not waiting:
        return []
    oldest = min(waiting, key=lambda t: (t.priority, t.arrival or 0.0))
    return [_take(oldest, limit)]


def fifo_batch(queue: Iterable[EngineTask], limit: int) -> list[Slice]:
    """TO: first come, first served across nodes and queries, up to the limit."""
    batch: list[Slice] = []
    slots = limit
    for task in sorted((t for t in queue if t.pending), key=lambda t: (t.priority, t.arrival or 0.0)):
        if slots == 0:
            break
        piece = _take(task, slots)
        batch.append(piece)
        slots -= piece.size
    return batch


POLICIES: dict[str, Policy] = {
    "topology": topology_batch,
    "po": per_invocation_batch,
    "to": fifo_batch,
}


def get_policy(name: str) -> Policy:
    """The batch-forming function for `name`; a typo is a config error, not a silent default."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(
            f"runtime: unknown batching policy {name!r}. Remedy: use one of {sorted(POLICIES)}."
        ) from None
