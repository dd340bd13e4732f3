"""How the runtime runs a node, as the passes decided it: a node's `Schedule`.

Adapters lower an app into primitives and leave every node's schedule at its default (the
node runs once, on its whole inputs). The passes decide streaming, micro-batching, mapping
and objectives and write them here; the runtime's plan (`accel.runtime.plan`) reads them once
per template. See `accel.ir.ops` for the streaming contract these fields select.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Streams(enum.Enum):
    """How a streaming node produces its items (each item a slice of its unsplit value)."""

    DECODE = "decode"
    """One LLM request streamed; the node's `StreamOp` parses the chunks into items (PartialDecode)."""
    SLICES = "slices"
    """The batch port run in slices of `Schedule.micro_batch` items, each slice's output an item."""
    MAPPED = "mapped"
    """A consumer mapped over a stream (`Schedule.map_port`) forwards each per-item output as an item."""


@dataclass(frozen=True)
class Schedule:
    """A node's scheduling decisions. The default runs the node once on its whole inputs."""

    streams: Streams | None = None
    """Whether, and how, the node produces items one by one (its final value: the list of items)."""
    micro_batch: int | None = None
    """With `Streams.SLICES`: the most items of the batch port one slice holds."""
    map_port: str | None = None
    """The port read from a streaming producer that this node runs once per item of."""
    objective: str | None = None
    """Parrot's deduced objective (`accel.ir.marks.LATENCY` / `THROUGHPUT`), None: unmarked."""

    def __post_init__(self) -> None:
        if (self.streams is Streams.SLICES) != (self.micro_batch is not None):
            raise ValueError(f"micro_batch={self.micro_batch} goes with streams=Streams.SLICES, not {self.streams}")
        if self.micro_batch is not None and self.micro_batch < 1:
            raise ValueError(f"micro_batch must be >= 1, not {self.micro_batch}")
        if self.streams is Streams.MAPPED and self.map_port is None:
            raise ValueError("a node streaming its per-item outputs (Streams.MAPPED) needs a map_port")


WHOLE = Schedule()
"""The default: run once on the whole inputs."""
