"""Drop-ins of the app's own class: one mechanism for every adapter.

`accel.wrap` hands back something the app can use exactly where it used the original,
`isinstance` checks included. A drop-in is a copy of the original (by default a shallow one:
it shares the memory, tools, LLM and every other component, so state stays where the app
expects it) whose class is a subclass of the original's, made once per wrap:

- named as the original's class (`__name__`, `__module__`: span names and `to_json` ids stay
  stock's), `Accel<Name>` in its qualified name;
- carrying the wrap's `DropInState` as the class attribute `__accel__`. The state lives on the
  class, not the instance: `Pregel.copy` passes every instance attribute to `__init__`,
  pydantic models validate instance attributes, and framework copies of the drop-in
  (`Pregel.copy`, `model_copy`, `with_config(...).bound`) keep the class and so the state. A
  dunder name is neither a pydantic field nor a private attribute;
- overriding only the entry points the adapter names (`entered` runs the class's own method
  inside a `WrappedRun`, learning from it when the state keeps a model).
"""

from __future__ import annotations

import asyncio
import copy as copying
import functools
import inspect
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from accel.adapters.common.floor import values
from accel.scope import WrappedRun, wrapped_run
from accel.types import ProgramLearner, Template

T = TypeVar("T")
STATE_ATTR = "__accel__"


@dataclass
class DropInState:
    """One wrap's state: what the entry points and `explain()` read."""

    kind: str
    session: Any = None
    lowered: list[str] = field(default_factory=list)
    captured: list[str] = field(default_factory=list)
    as_is: list[str] = field(default_factory=list)
    parts: list[Any] = field(default_factory=list)  # lowered components, explained below
    helper: Any = None  # what a lowered drop-in runs instead of the class's own code
    model: ProgramLearner | None = None  # learned prefill over the object's own code (`Session.learner`)
    # what `accel.batch` reads (`accel.consolidate`): the template its share scope runs over and
    # the counters it reports to; the app's own `batch` / `abatch` (a Runnable: `own_batch`), or
    # the (sync, async) entry point it calls once per input (`entry`; neither: no batch)
    template: Template | None = None
    counters: Counter[str] | None = None
    own_batch: bool = False
    entry: tuple[str, str] | None = None

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


def state_of(obj: object) -> DropInState | None:
    """The drop-in state of `obj` (a drop-in, or a drop-in class), or None for anything else."""
    cls = obj if isinstance(obj, type) else type(obj)
    found = cls.__dict__.get(STATE_ATTR)
    return found if isinstance(found, DropInState) else None


def dropin_class(base: type, state: DropInState, namespace: Mapping[str, object]) -> type:
    """`Accel<Name>`: a subclass of `base` named as it, holding `state` and `namespace` (the
    entry points and anything else the adapter overrides)."""
    made: dict[str, object] = {"__module__": base.__module__, "__qualname__": f"Accel{base.__qualname__}",
                               "__doc__": base.__doc__, STATE_ATTR: state}
    if "__dict__" not in dir(base):
        made["__slots__"] = ()  # keeps the layout, so the copy's `__class__` can be swapped
    made.update(namespace)
    return type(base)(base.__name__, (base,), made)


def make_dropin(original: T, state: DropInState, *, namespace: Mapping[str, object] | None = None,
                copy: Callable[[T], T] = copying.copy, replace: Mapping[str, object] | None = None) -> T:
    """`copy(original)` with its class swapped for a drop-in class of `type(original)`;
    `replace` rebinds attributes of the copy (lowered components), never the original's."""
    clone = copy(original)
    object.__setattr__(clone, "__class__", dropin_class(type(original), state, namespace or {}))
    for name, value in (replace or {}).items():
        object.__setattr__(clone, name, value)
    return clone


def entered(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (the class's own method) run inside its drop-in's wrapped run."""
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
    found = state_of(obj)
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
    found = state_of(obj)
    return WrappedRun(app=found.kind if found else type(obj).__name__, session=found.session if found else None)


def explain(self: Any) -> str:
    """A drop-in's `explain()`: what was lowered, captured and left as-is."""
    found = state_of(self)
    return found.explain() if found else f"accel.wrap({type(self).__name__})"
