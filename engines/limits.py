"""Batch limits of one engine, taken from its measured profile rather than from constants.

Teola forms batches "up to the maximum efficient batch size" (the size beyond which throughput
stops growing); for an LLM that batches internally the limit is the number of sequences kept in
flight. The engines' profiler measures these numbers and the engine catalogue
(`catalogue.py`) sets each engine's defaults; the runtime only reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EngineLimits:
    """How an engine scheduler may load one engine."""

    max_batch_size: int = 32
    """Requests per `engine.run` call (max efficient batch size) for batch engines."""
    max_inflight: int = 64
    """LLM engines: requests admitted at once (vLLM `max_num_seqs`)."""
    max_concurrent_batches: int = 1
    """Batch engines: `run` calls in flight at once (1 = continuous batching on one instance)."""
    queue_limit: int = 4096
    """Queued, not yet dispatched requests before `submit` waits (backpressure)."""
    use_priority: bool = True
    """LLM engines: send depth-derived priorities (the engine must schedule by priority)."""
    max_call_s: float | None = None
    """Batch engines: expected seconds one `run` call may take. With `item_seconds`, a batch
    holds the requests whose expected time fits (at least one); `max_batch_size` still caps
    the count. This sizes calls by duration on every machine instead of by a count that suits
    one: how long a query that arrives now may wait behind the call in flight."""
    item_seconds: Callable[[Any], float] | None = None
    """Expected seconds of one request at the engine's efficient batch size (from its
    measured profile, `accel.profiles`); None: calls are sized by count only."""
    efficient_calls: bool = False
    """Batch engines on a device of their own (encoder servers): once the engine is profiled, a
    call carries at most its max efficient batch (Teola's batch limit). Past it a bigger call
    gains the device little throughput and holds every query in it until the whole call ends.
    Not for in-process encoders, which share the LLM's cores (`catalogue.RERANK_CALL_S`)."""
    call_overhead_s: float = 0.0
    """Batch engines: seconds one `run` call costs whatever it carries (an encoder server's
    HTTP round trip and request handling: its profile's batch-1 latency less one item's
    share). While streams that feed this engine are still open, a call may be held for the
    items they are about to bring, until this much after the newest: an item later than a
    call's cost would find the engine free again, so waiting for it saves nothing. 0: calls
    go as soon as the engine is free."""

    def __post_init__(self) -> None:
        for name in ("max_batch_size", "max_inflight", "max_concurrent_batches", "queue_limit"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"runtime: EngineLimits.{name} must be a positive int, got {value!r}. "
                    "Remedy: pass the engine profile's measured value (>= 1)."
                )
        if self.max_call_s is not None and not self.max_call_s > 0:
            raise ValueError(f"runtime: EngineLimits.max_call_s must be > 0 seconds, got {self.max_call_s!r}. "
                             "Remedy: pass None to size calls by count only.")
        if not self.call_overhead_s >= 0:
            raise ValueError(f"runtime: EngineLimits.call_overhead_s must be >= 0 seconds, got {self.call_overhead_s!r}. "
                             "Remedy: pass the engine profile's measured per-call cost, or 0.")

    @property
    def sized_by_duration(self) -> bool:
        return self.max_call_s is not None and self.item_seconds is not None

    @classmethod
    def from_profile(cls, profile: Any) -> EngineLimits:
        """Read limits from an engine profile object or mapping by its common field names."""
        if isinstance(profile, EngineLimits):
            return profile
        get = profile.get if isinstance(profile, dict) else lambda k, d=None: getattr(profile, k, d)
        defaults = cls()
        batch = get("max_batch_size") or get("max_efficient_batch_size") or defaults.max_batch_size
        inflight = get("max_inflight") or get("max_num_seqs") or defaults.max_inflight
        return cls(
            max_batch_size=int(batch),
            max_inflight=int(inflight),
            max_concurrent_batches=int(get("max_concurrent_batches") or defaults.max_concurrent_batches),
            queue_limit=int(get("queue_limit") or defaults.queue_limit),
            use_priority=bool(get("use_priority", defaults.use_priority)),
        )
