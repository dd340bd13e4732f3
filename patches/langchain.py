"""LangChain patch: `RunnableSequence.invoke/ainvoke/batch/abatch/stream/astream` run through
`accel.wrap` (`astream_events` / `astream_log` reach `astream`).

Caching and the stock paths are those of `MethodPatch`.
"""

from __future__ import annotations

from typing import Any

from accel.patches.methods import MethodPatch

METHODS = ("invoke", "ainvoke", "batch", "abatch", "stream", "astream")


def _sequence_class() -> type:
    from langchain_core.runnables.base import RunnableSequence

    return RunnableSequence


def _make(name: str, original: Any) -> Any:
    if name in ("ainvoke", "abatch"):
        async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _PATCH.accelerated(self)
            if fast is None:
                return await original(self, *args, **kwargs)
            return await getattr(fast, name)(*args, **kwargs)
    else:
        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _PATCH.accelerated(self)
            if fast is None:
                return original(self, *args, **kwargs)
            return getattr(fast, name)(*args, **kwargs)
    return patched


_PATCH = MethodPatch(_sequence_class, METHODS, _make)
patch, unpatch, patched = _PATCH.patch, _PATCH.unpatch, _PATCH.patched
