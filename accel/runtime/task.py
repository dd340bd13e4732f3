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
