"""LangChain patch: `RunnableSequence.invoke/ainvoke/batch/abatch` run through `accel.wrap`.

Each chain object is wrapped once (cached by identity while it lives). Calls made by accel
itself (opaque nodes in its worker threads, a wrapped chain's stock fallback) go to the
original methods, so nothing is accelerated twice or loops. Streams stay stock.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

METHODS = ("invoke", "ainvoke", "batch", "abatch")

_originals: dict[str, Any] = {}
_wrapped: dict[int, tuple[weakref.ref, Any]] = {}
_lock = threading.Lock()


def _accelerated(chain: Any) -> Any | None:
    """The cached wrapped chain, or None when this call must stay stock."""
    from accel.adapters.common.bypass import in_stock_call

    if in_stock_call() or threading.current_thread().name.startswith("accel-"):
        return None
    with _lock:
        entry = _wrapped.get(id(chain))
        if entry is not None and entry[0]() is chain:
            return entry[1]
    import accel

    fast = accel.wrap(chain)
    with _lock:
        _wrapped[id(chain)] = (weakref.ref(chain, lambda _ref, key=id(chain): _wrapped.pop(key, None)), fast)
    return fast


def _make(name: str, original: Any) -> Any:
    if name in ("ainvoke", "abatch"):
        async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _accelerated(self)
            if fast is None:
                return await original(self, *args, **kwargs)
            return await getattr(fast, name)(*args, **kwargs)
    else:
        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _accelerated(self)
            if fast is None:
                return original(self, *args, **kwargs)
            return getattr(fast, name)(*args, **kwargs)
    patched.__wrapped__ = original  # type: ignore[attr-defined]
    patched.__name__ = name
    patched.__doc__ = original.__doc__
    return patched


def patch() -> None:
    from langchain_core.runnables.base import RunnableSequence

    with _lock:
        if _originals:
            return
        for name in METHODS:
            original = RunnableSequence.__dict__[name]
            _originals[name] = original
            setattr(RunnableSequence, name, _make(name, original))


def unpatch() -> None:
    from langchain_core.runnables.base import RunnableSequence

    with _lock:
        for name, original in _originals.items():
            setattr(RunnableSequence, name, original)
        _originals.clear()
        _wrapped.clear()


def patched() -> bool:
    return bool(_originals)
