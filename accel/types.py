"""accel's public types: the names apps and adapters use at the door to the runtime.

Adapters import these from here, not from `accel.session` or `accel.runtime`. This module
imports the IR and the engines only (never the runtime, the session, the passes or the
adapters), so naming a type loads no runtime.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

from accel.engines.catalogue import EngineSpec
from accel.engines.limits import EngineLimits
from accel.ir.dynamic import Prompt
from accel.ir.graph import Graph
from accel.ir.template import Template
from accel.scope import WrappedRun

__all__ = ["POLICY_NAMES", "Delta", "EngineCall", "EngineLimits", "EngineSpec", "Final", "Identity", "OnSessionLoop",
           "PolicyName", "ProgramLearner", "QueryWatcher", "StreamItem", "Template", "TemplateBuild"]

PolicyName = Literal["topology", "po", "to"]
"""How engine schedulers form batches (`accel.runtime.policies`): "topology" (Teola's
depth-aware batching), "po" (per invocation) or "to" (FIFO)."""

POLICY_NAMES: tuple[str, ...] = get_args(PolicyName)


@dataclass(frozen=True, slots=True)
class Delta:
    """The next piece of a query's output text; the pieces join to the decoded text (for a
    list output whose items the framework streams, `streams_items`, the text they are parsed
    from). In an output dict streamed by parts, the text of the part under the keys `path`."""

    text: str
    path: tuple[str, ...] = ()
    last: bool = False
    """The decode's last text: it came with the finish reason (a framework puts the finish
    metadata on that chunk)."""


@dataclass(frozen=True, slots=True)
class Part:
    """A part of a query's output dict, once known (`accel.ir.output_parts`): the value under
    the keys `path` (a text part's `Delta`s came before it); with `merge`, a dict whose items
    go under `path`, each its own part."""

    path: tuple[str, ...]
    value: Any
    merge: bool = False


@dataclass(frozen=True, slots=True)
class Final:
    """The query's output value (what `Runtime.run` returns); always a stream's last item."""

    value: Any


StreamItem = Delta | Part | Final


class QueryWatcher(Protocol):
    """What a query's caller may observe of its nodes while it runs (`accel.runtime.watch`).

    Framework adapters rebuild the framework's own callback runs from these events. A query
    without a watcher pays nothing; one with a watcher calls it on the session loop,
    synchronously, as each event happens, so it sees them in dependency order and must return
    quickly."""

    def finished(self, template: Template, node: str, value: Any) -> None:
        """Node `node` of `template` (the query's, or a sub-template an Expand node ran)
        produced `value` (a streamed node's items joined, as a reader of the whole sees it);
        graph inputs finish as the query starts."""

    def generated(self, template: Template, node: str, results: list[Any]) -> None:
        """Engine node `node` got `results` from its engine (a Decode's `Generation`s, whole
        even when the node streamed or parsed them)."""

    def wants_deltas(self, template: Template, node: str) -> bool:
        """Whether Decode `node` must stream so that `delta` gets its text as it is written
        (asked once per execution of the node)."""

    def delta(self, template: Template, node: str, text: str) -> None:
        """The next piece of text of a streaming Decode: the one whose text is the query's
        output, or one the watcher `wants_deltas` of."""


@dataclass(frozen=True)
class EngineCall:
    """One engine call of a wrapped run (a program), as the floor reports it to the session
    (`Session.call` / `acall` / `stream_call` / `astream_call`); the runtime makes the task."""

    engine: EngineSpec
    requests: Sequence[object]
    component: str
    """Counters, logs and the task's node name."""
    shape: Callable[[list[object]], object] = list
    """The engine's results (in request order) -> the component's own return value."""
    prompt: Prompt | None = None
    """An LLM call: the request's prompt as the floor read it (learned prefill)."""
    answer: Callable[[object], tuple[str | None, int | None]] | None = None
    """An LLM call: (text, cached tokens) of its one result, or of a stream's chunks (a list)."""
    shown: Callable[[object], list[str]] | None = None
    """A search: how the documents in the shaped value print (a prompt may show them)."""


class OnSessionLoop(Exception):
    """A blocking engine call was made on the session loop's own thread (it stays stock)."""


Locate = Callable[[], "tuple[str, str] | None"]
"""The (node, task key) of the code calling now, or None where the program has no nodes."""


class ProgramLearner(Protocol):
    """Learned prefill of one wrapped app that runs its own code (`Session.learner`)."""

    def start(self, run: WrappedRun, locate: Locate | None, values: dict[str, str]) -> Callable[[], None]:
        """Record `run`, whose input holds `values` (text leaves by name); the returned
        function ends the recording."""

    def explain(self) -> list[str]:
        """What the runs taught, for `explain()`."""


class Identity:
    """A part of a template's structure key that names an object: equal only to an `Identity`
    of the same live object. It holds the object weakly, so a key never keeps an app alive,
    and once the object is gone it equals nothing else, whichever object later gets its
    `id` (objects that cannot be weakly referenced are held strongly)."""

    __slots__ = ("_hash", "_ref")

    def __init__(self, obj: object) -> None:
        try:
            self._ref: Callable[[], object] = weakref.ref(obj)
        except TypeError:
            self._ref = lambda: obj
        self._hash = id(obj)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Identity) or other._hash != self._hash:
            return False
        obj = self._ref()
        return obj is not None and obj is other._ref()

    def __repr__(self) -> str:
        obj = self._ref()
        return f"Identity({type(obj).__name__ if obj is not None else 'dead'} at {self._hash:#x})"


@dataclass(frozen=True)
class TemplateBuild:
    """What `Session.template` needs to make a template: the p-graph `graph()` builds, under
    the structure `key` that caches it (parts naming objects are `Identity`s), optimised by
    the passes minus `disabled_passes` (none at all when `passes` is False). The session
    derives what the passes know of the engines."""

    key: Hashable
    graph: Callable[[], Graph]
    disabled_passes: tuple[str, ...] = ()
    passes: bool = True
