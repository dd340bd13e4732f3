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

from accel.runtime.objectives import LATENCY
from accel.runtime.task import EngineTask, Slice, TaskQueue
from accel.types import PolicyName
Policy = Callable[[Iterable[EngineTask], int], list[Slice]]


def _take(task: EngineTask, slots: int) -> Slice:
    n = min(slots, task.pending)
    return Slice(task, task.taken, task.taken + n)


def topology_batch(queue: Iterable[EngineTask], limit: int) -> list[Slice]:
    """Teola's topology-aware batching with work-conserving fill of lower depth levels; nodes
    marked latency-critical (Parrot's objective deduction) are admitted first, oldest first."""
    ordered = sorted(_buckets(queue), key=_bucket_key)
    batch: list[Slice] = []
    slots = limit
    urgent = sorted((t for tasks in ordered for t in tasks if t.pending and t.objective == LATENCY),
                    key=lambda t: (t.priority, t.arrival or 0.0))
    for task in urgent:
        if slots == 0:
            return batch
        piece = _take(task, slots)
        batch.append(piece)
        slots -= piece.size
    admitted = {id(t) for t in urgent}
    deeper: list[list[EngineTask]] = []  # what each bucket has left after its deepest level
    for tasks in ordered:
        waiting = [t for t in tasks if t.pending and id(t) not in admitted]
        if not waiting:
            continue
        taken = _take_deepest(waiting, slots, batch)
        if taken is None:
            return batch
        slots, rest = taken
        deeper.append(rest)
    while slots and any(deeper):  # free slots: the next depth level of every bucket, in order
        for i, tasks in enumerate(deeper):
            if not tasks:
                continue
            taken = _take_deepest(tasks, slots, batch)
            if taken is None:
                return batch
            slots, deeper[i] = taken
    return batch


def _take_deepest(tasks: list[EngineTask], slots: int, batch: list[Slice]) -> tuple[int, list[EngineTask]] | None:
    """Append slices of the deepest level of `tasks` to `batch`; return the slots left and the
    shallower tasks, or None when the batch filled up before the level was taken."""
    top = max(t.depth for t in tasks)
    for task in tasks:
        if task.depth == top:
            if slots == 0:
                return None
            piece = _take(task, slots)
            batch.append(piece)
            slots -= piece.size
    return slots, [t for t in tasks if t.depth < top]


def _buckets(queue: Iterable[EngineTask]):
    """Tasks grouped by query, each group in arrival order (prebuilt by a TaskQueue)."""
    if isinstance(queue, TaskQueue):
        return queue.bucket_views()
    groups: dict[str, list[EngineTask]] = {}
    for task in sorted(queue, key=lambda t: t.arrival or 0.0):
        groups.setdefault(task.query_id, []).append(task)
    return groups.values()


def _bucket_key(tasks) -> tuple[int, float]:
    """(query priority, earliest arrival): the first task is the earliest queued."""
    first = next(iter(tasks))
    return (first.priority, first.arrival or 0.0)


def within_seconds(batch: list[Slice], seconds: Callable[[object], float], budget: float) -> list[Slice]:
    """The leading requests of `batch` whose expected seconds add up to at most `budget`
    (always at least one request, so an oversized request still runs, alone)."""
    kept: list[Slice] = []
    spent = 0.0
    for piece in batch:
        stop = piece.start
        for index in range(piece.start, piece.stop):
            cost = seconds(piece.task.requests[index])
            if spent + cost > budget and (kept or stop > piece.start):
                break
            spent += cost
            stop += 1
        if stop > piece.start:
            kept.append(Slice(piece.task, piece.start, stop))
        if stop < piece.stop:
            break
    return kept


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
