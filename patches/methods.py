"""Reversible method patches that route a framework class's entry points through `accel.wrap`.

Each framework object is wrapped once (cached by identity while it lives). Calls made inside a
wrapped run (opaque steps, LangGraph nodes, tools) or marked `stock_call()` go to the original
methods (`accel.scope`), so nothing is accelerated twice or loops.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

Make = Callable[[str, Any], Any]


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
        self._wrapped: dict[int, tuple[weakref.ref, Any]] = {}
        self._lock = threading.Lock()

    def accelerated(self, obj: Any) -> Any | None:
        """The cached wrapped object, or None when this call must stay stock."""
        from accel.scope import current_run, in_stock_call

        # inside a wrapped run (opaque steps, nodes, tools) nested apps are part of that program
        if not self._accept(obj) or in_stock_call() or current_run() is not None:
            return None
        with self._lock:
            entry = self._wrapped.get(id(obj))
            if entry is not None and entry[0]() is obj:
                return entry[1]
        import accel

        fast = accel.wrap(obj)
        with self._lock:
            self._wrapped[id(obj)] = (weakref.ref(obj, lambda _ref, key=id(obj): self._wrapped.pop(key, None)), fast)
        return fast

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
            self._wrapped.clear()

    def patched(self) -> bool:
        return bool(self._originals)
