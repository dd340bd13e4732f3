"""Reversible method patches that route a framework class's entry points through `accel.wrap`.

Each framework object is wrapped once: its drop-in is kept on the object itself (`_DropIn`,
in its `__dict__`), never in a global table. A drop-in holds its original, so a global entry
would keep both alive forever; kept on the object they form a cycle the collector frees once
the app drops the object. Calls made inside a wrapped run (opaque steps, LangGraph nodes,
tools) or marked `stock_call()` go to the original methods (`accel.scope`), so nothing is
accelerated twice or loops.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from accel.scope import current_run, in_stock_call

logger = logging.getLogger("accel.patches")
_store_lock = threading.Lock()

Make = Callable[[str, Any], Any]
ATTR = "_accel_dropin"  # an underscore name: pydantic's iteration and LangChain's to_json skip it


class _DropIn:
    """An object's drop-in, stored on the object. It names its owner (weakly), so a copy of the
    object (`copy.copy`, pydantic's `model_copy`: they copy `__dict__`) does not take it for its
    own; a deep copy or a pickle of the object holds None there (no drop-in, no accel import)."""

    __slots__ = ("owner", "fast")

    def __init__(self, owner: Any, fast: Any) -> None:
        self.owner = weakref.ref(owner)
        self.fast = fast

    def __deepcopy__(self, memo: dict) -> None:
        return None

    def __reduce__(self) -> tuple:
        return (type(None), ())


def _kept(obj: Any, state: dict[str, Any]) -> Any | None:
    found = state.get(ATTR)
    return found.fast if isinstance(found, _DropIn) and found.owner() is obj else None


class MethodPatch:
    """`patch()` replaces `methods` of the class `load_class()` returns with `make(name,
    original)`; `unpatch()` restores them. `accept(obj)` says which objects to accelerate."""

    def __init__(self, load_class: Callable[[], type], methods: tuple[str, ...], make: Make,
                 accept: Callable[[Any], bool] = lambda obj: True) -> None:
        self._load_class = load_class
        self.methods = methods
        self._make = make
        self._accept = accept
        self._originals: dict[str, Any] = {}
        self._lock = threading.Lock()

    def accelerated(self, obj: Any) -> Any | None:
        """The object's drop-in (made once), or None when this call must stay stock."""
        # inside a wrapped run (opaque steps, nodes, tools) nested apps are part of that program
        if not self._accept(obj) or in_stock_call() or current_run() is not None:
            return None
        state = getattr(obj, "__dict__", None)
        fast = _kept(obj, state) if state is not None else None
        if fast is not None:
            return fast
        import accel

        fast = accel.wrap(obj)
        if state is None:  # no instance dict to keep it in: wrapped per call
            logger.debug("%s has no __dict__: its drop-in is not kept", type(obj).__name__)
            return fast
        with _store_lock:  # two first calls at once: the second returns the first one's drop-in
            kept = _kept(obj, state)
            if kept is None:
                state[ATTR] = _DropIn(obj, fast)  # not setattr: pydantic models refuse unknown fields
                kept = fast
        return kept

    def patch(self) -> None:
        cls = self._load_class()
        with self._lock:
            if self._originals:
                return
            for name in self.methods:
                original = cls.__dict__[name]
                self._originals[name] = original
                replacement = self._make(name, original)
                replacement.__wrapped__ = original
                replacement.__name__ = name
                replacement.__doc__ = original.__doc__
                setattr(cls, name, replacement)

    def unpatch(self) -> None:
        cls = self._load_class()
        with self._lock:
            for name, original in self._originals.items():
                setattr(cls, name, original)
            self._originals.clear()

    def patched(self) -> bool:
        return bool(self._originals)
