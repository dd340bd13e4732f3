"""Which wrapped run the current code belongs to, and whether it must stay stock.

A wrapped app (`accel.wrap(...)` or `ACCEL_AUTO=1`) enters a `WrappedRun` for each top-level
call; code it calls, wherever it runs (opaque steps, LangGraph nodes, tools, worker threads
that copied the context), sees it through `current_run()`. Engine-call capture uses it to know
when, and for which program, to route a framework component's engine calls through accel.

`stock_call()` marks code that must take the stock framework path even when entry points are
patched (a wrapped app's own original, an opaque component run as-is), so nothing is
accelerated twice and nothing loops. Both are context variables: they follow asyncio tasks and
`contextvars.copy_context()`, never thread names.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_programs = itertools.count(1)


@dataclass
class WrappedRun:
    """One top-level call of a wrapped app: a program in Autellix's sense."""

    app: str
    session: Any = None
    program: int = field(default_factory=lambda: next(_programs))
    attained_s: float = 0.0
    """LLM service time this program has had so far (least-attained-service priority)."""
    remaining_depth: Callable[[], int | None] | None = None
    """Where the app's structure is known (a LangGraph graph): the longest path, in nodes,
    from the node now running in the calling context to the end; None where unknown."""
    recorder: Any = None
    """What the floor tells about this run's engine calls, where the app learns from its runs
    (`accel.runtime.programs.RunRecorder`, from `Session.learner`); None elsewhere."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_service(self, seconds: float) -> None:
        """Count LLM service this program received (calls from several threads at once)."""
        with self._lock:
            self.attained_s += seconds


_run: contextvars.ContextVar[WrappedRun | None] = contextvars.ContextVar("accel_wrapped_run", default=None)
_stock: contextvars.ContextVar[bool] = contextvars.ContextVar("accel_stock_call", default=False)


def current_run() -> WrappedRun | None:
    """The wrapped run the calling code belongs to, or None outside any wrapped run."""
    return _run.get()


class wrapped_run:  # noqa: N801 (used as a function: `with wrapped_run(run) as run:`)
    """Enter `run` unless the caller is already inside one (a wrapped app called from another
    wrapped app is part of the outer program); `as` gives the run entered. A class rather than
    a generator context manager: it is entered on every call of a wrapped app."""

    __slots__ = ("_run", "_token")

    def __init__(self, run: WrappedRun) -> None:
        self._run = run
        self._token: contextvars.Token | None = None

    def __enter__(self) -> WrappedRun:
        outer = _run.get()
        if outer is not None:
            return outer
        self._token = _run.set(self._run)
        return self._run

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _run.reset(self._token)


def context_with(run: WrappedRun) -> contextvars.Context:
    """A copy of the caller's context inside `run` (or inside the caller's own run): for work
    started now but driven later from elsewhere, such as a stream's query."""
    context = contextvars.copy_context()
    if context.get(_run) is None:
        context.run(_run.set, run)
    return context


class stock_call:  # noqa: N801 (used as a function: `with stock_call():`)
    """Mark the code inside as stock (patched entry points take their originals). A class:
    it is entered around each chunk of a stream run as-is."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _stock.set(True)

    def __exit__(self, *exc: object) -> None:
        _stock.reset(self._token)


def in_stock_call() -> bool:
    return _stock.get()
