"""The unit an engine scheduler queues: all requests of one primitive node of one query.

The graph scheduler hands over the node, not loose requests (Teola §5.1), so batching policies
can see which requests belong together, the node's depth and the query it advances.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class EngineTask:
    """One node's requests. `taken` counts requests already handed to batches: a policy may
    split a node across batches, taking `requests[taken:taken + n]` each time."""

    query_id: str
    node: str
    depth: int
    requests: list[Any]
    arrival: float | None = None
    """When the node became ready; the engine scheduler stamps it if the caller did not."""
    priority: int = 0
    """Query priority, lower runs first (vLLM's convention)."""
    stream: bool = False
    """An LLM node whose single request is streamed by its caller after admission."""
    objective: str | None = None
    """Parrot's deduced objective of the node ("latency", "throughput" or None: unmarked)."""
    taken: int = 0
    results: list[Any] = field(default_factory=list)
    done: int = 0
    future: asyncio.Future[list[Any]] | None = None
    dispatched_at: float | None = None
    batch_sizes: list[int] = field(default_factory=list)
    inflight: set[Any] = field(default_factory=set)
    """Engine calls now running some of this task's requests (so cancellation can reach them)."""

    @property
    def pending(self) -> int:
        """Requests not yet handed to a batch."""
        return len(self.requests) - self.taken


@dataclass(frozen=True)
class Slice:
    """`task.requests[start:stop]` goes into the batch being formed."""

    task: EngineTask
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


class TaskQueue:
    """Queued tasks in arrival order, also kept grouped by query (Teola's buckets), so forming
    a topology-aware batch does not regroup the whole queue each time."""

    __slots__ = ("_tasks", "_buckets")

    def __init__(self) -> None:
        self._tasks: dict[EngineTask, None] = {}
        self._buckets: dict[str, dict[EngineTask, None]] = {}

    def add(self, task: EngineTask) -> None:
        self._tasks[task] = None
        self._buckets.setdefault(task.query_id, {})[task] = None

    def remove(self, task: EngineTask) -> None:
        del self._tasks[task]
        bucket = self._buckets[task.query_id]
        del bucket[task]
        if not bucket:
            del self._buckets[task.query_id]

    def bucket_views(self):
        """The per-query task collections without copying (arrival order within each)."""
        return self._buckets.values()

    def clear(self) -> None:
        self._tasks.clear()
        self._buckets.clear()

    def __contains__(self, task: object) -> bool:
        return task in self._tasks

    def __iter__(self):
        return iter(list(self._tasks))

    def __len__(self) -> int:
        return len(self._tasks)
