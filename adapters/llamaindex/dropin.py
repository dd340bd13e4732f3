"""Drop-ins of the app's own class: a shallow copy whose class is a subclass of the original's.

`accel.wrap` must hand back something the app can use exactly where it used the original,
`isinstance` checks included (a `CondensePlusContextChatEngine`, a `FunctionAgent`, a user's
`Workflow` subclass). A drop-in is therefore a shallow copy of the original (it shares the
memory, tools, LLM and every other component, so state stays where the app expects it) whose
class is a subclass (named as the original's, `Accel<Name>` in its qualified name) of the original's class made once per class. The subclass
only overrides the entry points (`query`, `chat`, `retrieve`, `run`, ... and their async and
streaming twins): each runs the original class's own code inside a `WrappedRun`, so engine
calls made anywhere below it belong to this program. Components the adapter can lower are
swapped in the copy for their lowered drop-ins (`accel.adapters.llamaindex.components`).

What was lowered, captured and left as-is is kept on the copy (`explain()`).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accel.adapters.common.floor import values
from accel.scope import WrappedRun, wrapped_run
from accel.types import ProgramLearner

# the entry points a LlamaIndex object may have, by family; every one present is wrapped
ENTRY_POINTS: tuple[str, ...] = (
    "query", "aquery", "chat", "achat", "stream_chat", "astream_chat", "retrieve", "aretrieve", "run",
)
INFO_ATTR = "_accel_dropin"


@dataclass
class DropInInfo:
    """What `explain()` reports about one drop-in."""

    kind: str
    session: Any = None
    lowered: list[str] = field(default_factory=list)
    captured: list[str] = field(default_factory=list)
    as_is: list[str] = field(default_factory=list)
    parts: list[Any] = field(default_factory=list)  # lowered components, explained below
    helper: Any = None  # what a lowered drop-in runs instead of the class's own code
    model: ProgramLearner | None = None  # learned prefill over the object's own code (`Session.learner`)

    def explain(self) -> str:
        lines = [f"accel.wrap({self.kind}): drop-in of the same class; its own code runs inside a wrapped run"]
        for title, items in (("lowered", self.lowered), ("captured (engine calls through accel's schedulers)", self.captured),
                             ("as-is", self.as_is)):
            lines.append(f"{title}:" if items else f"{title}: none")
            lines += [f"  - {item}" for item in items]
        if self.model is not None:
            lines += self.model.explain()
        for part in self.parts:
            explain = getattr(part, "explain", None)
            if callable(explain):
                lines += ["", *explain().splitlines()]
        return "\n".join(lines)


def info(obj: Any) -> DropInInfo | None:
    return obj.__dict__.get(INFO_ATTR) if hasattr(obj, "__dict__") else None


def is_dropin(obj: Any) -> bool:
    return info(obj) is not None


def _entered(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (the class's own method) run inside this drop-in's wrapped run."""
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def entry(self: Any, *args: Any, **kwargs: Any) -> Any:
            fresh = _new_run(self)
            with wrapped_run(fresh) as run:
                end = _record(self, run, fresh, args, kwargs)
                try:
                    return await original(self, *args, **kwargs)
                finally:
                    end()
    else:
        @functools.wraps(original)
        def entry(self: Any, *args: Any, **kwargs: Any) -> Any:
            # a stream's generator, a workflow's tasks and LlamaIndex's history-writer threads
            # are created in here, so they copy this context and stay inside the run
            fresh = _new_run(self)
            with wrapped_run(fresh) as run:
                end = _record(self, run, fresh, args, kwargs)
                result = None
                try:
                    result = original(self, *args, **kwargs)
                    return result
                finally:
                    _end_with(result, end)
    entry.__accel_entry__ = name  # type: ignore[attr-defined]
    return entry


def _record(obj: Any, run: WrappedRun, fresh: WrappedRun, args: tuple, kwargs: dict) -> Callable[[], None]:
    """Learn from `run` when the drop-in keeps a model and the run is its own (not an outer
    app's); the returned function ends the recording."""
    found = info(obj)
    if found is None or found.model is None or run is not fresh:
        return _nothing
    return found.model.start(run, None, values.of_input({"args": list(args), "kwargs": kwargs}))


def _end_with(result: Any, end: Callable[[], None]) -> None:
    """End the recording now, or when `result` (a workflow's handler, an asyncio future that
    the workflow finishes later) is done."""
    if isinstance(result, asyncio.Future) and not result.done():
        result.add_done_callback(lambda _future: end())
    else:
        end()


def _nothing() -> None:
    return None


def _new_run(obj: Any) -> WrappedRun:
    found = info(obj)
    return WrappedRun(app=found.kind if found else type(obj).__name__, session=found.session if found else None)


def _explain(self: Any) -> str:
    found = info(self)
    return found.explain() if found else f"accel.wrap({type(self).__name__})"


_classes: dict[tuple[type, tuple[tuple[str, Any], ...]], type] = {}
_lock = threading.Lock()


def dropin_class(cls: type, overrides: dict[str, Any] | None = None) -> type:
    """`Accel<Name>`: `cls` with its entry points run inside a wrapped run (made once per class
    and set of `overrides`, methods that replace the class's own)."""
    overrides = dict(overrides or {})
    key = (cls, tuple(sorted(overrides.items())))
    with _lock:
        found = _classes.get(key)
        if found is not None:
            return found
        namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": f"Accel{cls.__qualname__}",
                                     "__doc__": cls.__doc__, "explain": _explain}
        for name in ENTRY_POINTS:
            method = overrides.get(name) or getattr(cls, name, None)
            if inspect.isfunction(method):
                namespace[name] = _entered(name, method)
        for name, method in overrides.items():
            namespace.setdefault(name, method)
        # the same __name__ as the original's: LlamaIndex names spans after type(instance).__name__
        made = type(cls)(cls.__name__, (cls,), namespace)
        _classes[key] = made
        return made


def make_dropin(original: Any, kind_info: DropInInfo, *, overrides: dict[str, Any] | None = None,
                replace: dict[str, Any] | None = None) -> Any:
    """A shallow copy of `original` whose class is its drop-in class; `replace` sets attributes
    of the copy (lowered components) without touching the original."""
    clone = copy.copy(original)
    object.__setattr__(clone, "__class__", dropin_class(type(original), overrides))
    for name, value in (replace or {}).items():
        object.__setattr__(clone, name, value)
    object.__setattr__(clone, INFO_ATTR, kind_info)
    runtime = getattr(clone, "_runtime", None)
    if runtime is not None and hasattr(runtime, "track_workflow"):
        runtime.track_workflow(clone)  # a Workflow registers each instance with its runtime
    return clone


def has_entry_point(obj: Any) -> bool:
    return any(callable(getattr(type(obj), name, None)) for name in ENTRY_POINTS)
