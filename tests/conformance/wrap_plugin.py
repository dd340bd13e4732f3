"""pytest plugin (`-p wrap_plugin`): every LCEL chain a test suite calls runs through
`accel.wrap`, at every entry point (the `accel.wrap` variant of the conformance runs; the
`ACCEL_AUTO=1` variant patches what a user's process gets).

Sequences and parallels (`a | b`, `{...}`) keep their class, so the suite's own isinstance and
snapshot checks see the objects it built; each call goes to `accel.wrap(chain).<method>`.
"""

from __future__ import annotations

import inspect
from typing import Any

ENTRY_POINTS = ("invoke", "ainvoke", "batch", "abatch", "stream", "astream", "transform", "atransform",
                "batch_as_completed", "abatch_as_completed", "astream_log", "astream_events")

_patches: list[Any] = []


def _maker(patch_ref: list[Any]):
    def make(name: str, original: Any) -> Any:
        if inspect.iscoroutinefunction(original):
            async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
                fast = patch_ref[0].accelerated(self)
                if fast is None:
                    return await original(self, *args, **kwargs)
                return await getattr(fast, name)(*args, **kwargs)
        else:
            def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
                fast = patch_ref[0].accelerated(self)
                if fast is None:
                    return original(self, *args, **kwargs)
                return getattr(fast, name)(*args, **kwargs)
        return patched

    return make


def pytest_configure(config: Any) -> None:
    from langchain_core.runnables.base import RunnableParallel, RunnableSequence

    from accel.patches.methods import MethodPatch

    for cls in (RunnableSequence, RunnableParallel):
        methods = tuple(name for name in ENTRY_POINTS if name in cls.__dict__)  # inherited ones call these
        ref: list[Any] = []
        patch = MethodPatch(lambda cls=cls: cls, methods, _maker(ref))
        ref.append(patch)
        _patches.append(patch)
        patch.patch()


def pytest_unconfigure(config: Any) -> None:
    for patch in _patches:
        patch.unpatch()
