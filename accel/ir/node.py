"""Nodes, references to upstream values, and the `Op` protocol through which a node computes.

The runtime never special-cases adapters: everything it needs to run a node is the node's kind,
its engine name, its resolved input values and its op. See `accel.ir.ops` for the concrete ops
and the streaming contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from accel.ir.kinds import ENGINE_KINDS, ITEMWISE_KINDS, Kind
from accel.ir.schedule import WHOLE, Schedule


@dataclass(frozen=True)
class Ref:
    """The output value of node `node`, indexed by `key` when given (`value[key]`)."""

    node: str
    key: str | int | None = None

    def resolve(self, value: Any) -> Any:
        return value if self.key is None else value[self.key]


@runtime_checkable
class Op(Protocol):
    """How a node computes. A marker protocol; the runtime uses one of the two shapes below.

    - engine-bound nodes (`Kind` in ENGINE_KINDS) implement `EngineOp` (`StreamOp` where the
      node's schedule streams one decode, `Streams.DECODE`);
    - local nodes (Input/Output/Call/Condition/Aggregate/Prefill/FullPrefill) implement `LocalOp`.

    What may wait is `async def`, always: `EngineOp.requests`, an async `LocalOp.compute`,
    `StreamOp.stream`. The runtime never inspects a returned value for an awaitable.
    """


@runtime_checkable
class EngineOp(Op, Protocol):
    """An op that talks to an engine.

    `requests(values)` (always `async def`) returns the engine requests for the node given its
    resolved input values (possibly empty: then the engine is not called and `output(values,
    [])` is used). `output(values, results)` builds the node's value from the engine's results,
    which come back in request order.
    """

    async def requests(self, values: dict[str, Any]) -> list[Any]: ...

    def output(self, values: dict[str, Any], results: list[Any]) -> Any: ...


@runtime_checkable
class LocalOp(Op, Protocol):
    """An op computed in the front-end process, in one of three ways the runtime's plan reads
    once per template: an `async def compute` runs as a task on the loop; a plain `compute`
    with `blocking` true runs in a worker thread (framework code, sync-only components) and
    one with `blocking` false is cheap and runs inline. A plain `compute` returns the value
    itself, never an awaitable."""

    blocking: bool

    def compute(self, values: dict[str, Any]) -> Any: ...


@runtime_checkable
class StreamOp(EngineOp, Protocol):
    """An engine op whose node's schedule streams a decode (`Streams.DECODE`) of one LLM request: the runtime
    streams that request (`LLMEngine.stream`) and passes the chunks here; every yielded item is
    forwarded at once to mapped consumers. The node's final value is the list of items."""

    def stream(self, values: dict[str, Any], chunks: AsyncIterator[Any]) -> AsyncIterator[Any]: ...


class Role(Enum):
    """What a pass made a node for, from the node it derives from (`Derived`)."""

    WARM_UP = "warm"  # prefill_split: the prompt's ready head, prefilled early
    SHARED_HEAD = "head"  # share_prefixes: a static head warmed once for its prompts
    MICRO_BATCH = "mb"  # stage_decompose: one slice of a batchable node
    AGGREGATE = "agg"  # decode_pipeline / stage_decompose: the whole list, for whole readers


@dataclass(frozen=True)
class Derived:
    """A pass-made node's origin: the node `origin` it was made from, its `role` and, for
    micro-batches, its `index`. Passes find each other's nodes by this, never by name."""

    origin: str
    role: Role
    index: int | None = None

    @property
    def name(self) -> str:
        """The derived node's name (`origin#warm`, `origin#mb2`, ...), for pictures and spans."""
        return f"{self.origin}#{self.role.value}{'' if self.index is None else self.index}"


@dataclass(eq=False)
class Node:
    """One primitive. `inputs` maps port names to upstream refs (one data edge per port);
    `attrs` hold what the primitive is, as adapters and passes describe it (batchable,
    batch_port, splittable, prompt_parts, size, ...); `schedule` holds how the runtime runs it,
    as the passes decided (`accel.ir.schedule`); `depth` is the longest path length to the
    Output node (set by `Graph.compute_depths`); `derived` says which node a pass made this one
    from, and why (None for the adapters' own nodes)."""

    name: str
    kind: Kind
    engine: str | None = None
    inputs: dict[str, Ref] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    op: Op | None = None
    depth: int = 0
    derived: Derived | None = None
    schedule: Schedule = WHOLE

    @property
    def is_engine(self) -> bool:
        return self.kind in ENGINE_KINDS

    @property
    def streams(self) -> bool:
        return self.schedule.streams is not None

    @property
    def map_port(self) -> str | None:
        return self.schedule.map_port

    @property
    def passthrough_port(self) -> str | None:
        """The port whose value a node without an op forwards ("value", else its one port)."""
        if "value" in self.inputs:
            return "value"
        return next(iter(self.inputs)) if len(self.inputs) == 1 else None

    @property
    def batch_port(self) -> str | None:
        """The list-valued port this node is data-parallel over, if it is batchable."""
        if not self.attrs.get("batchable", self.kind in ITEMWISE_KINDS):
            return None
        port = self.attrs.get("batch_port")
        if port is None and len(self.inputs) == 1:
            port = next(iter(self.inputs))
        return port

    def replace(self, **changes: Any) -> Node:
        """A copy with `changes`; `inputs` and `attrs` are copied so the original stays intact."""
        fields = {
            "name": self.name,
            "kind": self.kind,
            "engine": self.engine,
            "inputs": dict(self.inputs),
            "attrs": dict(self.attrs),
            "op": self.op,
            "depth": self.depth,
            "derived": self.derived,
            "schedule": self.schedule,
        }
        fields.update(changes)
        return Node(**fields)
