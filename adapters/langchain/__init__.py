"""LangChain adapter: `accel.wrap(runnable)` for LCEL chains.

Importing this package registers the adapter with `accel.wrap`; the dispatcher imports it when
an app has imported `langchain_core`.
"""

from __future__ import annotations

from typing import Any

from accel.options import WrapOptions
from accel.wrap import register_adapter


def _matches(obj: Any) -> bool:
    from langchain_core.runnables import Runnable

    return isinstance(obj, Runnable)


def wrap_runnable(runnable: Any, options: WrapOptions | None = None) -> Any:
    """`accel.wrap` for a LangChain Runnable (already wrapped ones are returned unchanged)."""
    from accel.adapters.common import floor
    from accel.adapters.langchain.runnable import WrappedRunnable

    floor.install()  # engine-call capture inside its runs (idempotent; inert outside them)
    if isinstance(runnable, WrappedRunnable):
        return runnable
    options = options or WrapOptions()
    return WrappedRunnable(runnable, policy=options.policy, disabled_passes=options.disabled_passes, fallback=options.fallback)


register_adapter(_matches, wrap_runnable, name="langchain")

__all__ = ["wrap_runnable"]
