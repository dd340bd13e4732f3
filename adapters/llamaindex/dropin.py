"""LlamaIndex drop-ins: the common drop-in (`accel.adapters.common.dropin`) with LlamaIndex's
entry points.

A drop-in of a `CondensePlusContextChatEngine`, a `FunctionAgent` or a user's `Workflow`
subclass is a shallow copy of the original whose class is a subclass of the original's, made
per wrap. It overrides the entry points (`query`, `chat`, `retrieve`, `run`, ... and their
async and streaming twins): each runs the original class's own code inside a `WrappedRun`, so
engine calls made anywhere below it belong to this program. Components the adapter can lower
are swapped in the copy for their lowered drop-ins (`accel.adapters.llamaindex.components`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, TypeVar

from accel.adapters.common import dropin as common
from accel.adapters.common.dropin import DropInState

T = TypeVar("T")

# the entry points a LlamaIndex object may have, by family; every one present is wrapped
ENTRY_POINTS: tuple[str, ...] = (
    "query", "aquery", "chat", "achat", "stream_chat", "astream_chat", "retrieve", "aretrieve", "run",
)

# the (sync, async) entry points `accel.batch` runs once per input, the first one a drop-in has
BATCH_ENTRIES: tuple[tuple[str, str], ...] = (("query", "aquery"), ("chat", "achat"), ("retrieve", "aretrieve"))


def make_dropin(original: T, state: DropInState, *, overrides: Mapping[str, Any] | None = None,
                replace: Mapping[str, Any] | None = None) -> T:
    """The drop-in of `original`: its entry points (or `overrides` of them, and other methods
    `overrides` names) run inside a wrapped run; `replace` sets attributes of the copy (lowered
    components) without touching the original."""
    overrides = dict(overrides or {})
    cls = type(original)
    namespace: dict[str, Any] = {"explain": common.explain}
    for name in ENTRY_POINTS:
        method = overrides.get(name) or getattr(cls, name, None)
        if inspect.isfunction(method):
            namespace[name] = common.entered(name, method)
    namespace.update({name: method for name, method in overrides.items() if name not in ENTRY_POINTS})
    if state.entry is None:  # what `accel.batch` calls once per input
        state.entry = next(((sync, async_) for sync, async_ in BATCH_ENTRIES
                            if callable(getattr(cls, sync, None)) and callable(getattr(cls, async_, None))), None)
    clone = common.make_dropin(original, state, namespace=namespace, replace=replace)
    runtime = getattr(clone, "_runtime", None)
    if runtime is not None and hasattr(runtime, "track_workflow"):
        runtime.track_workflow(clone)  # a Workflow registers each instance with its runtime
    return clone


def has_entry_point(obj: Any) -> bool:
    return any(callable(getattr(type(obj), name, None)) for name in ENTRY_POINTS)
