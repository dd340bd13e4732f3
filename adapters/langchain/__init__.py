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
    """`accel.wrap` for a LangChain Runnable: a drop-in of its own class
    (`accel.adapters.langchain.dropin`); a drop-in is returned unchanged."""
    from accel.adapters.common import floor
    from accel.adapters.common.dropin import state_of
    from accel.adapters.langchain import sync_code
    from accel.adapters.langchain.dropin import wrap_chain

    floor.install()  # engine-call capture inside its runs (idempotent; inert outside them)
    sync_code.install()  # an async call's sync code in accel's pool (idempotent; inert outside its runs)
    if state_of(runnable) is not None:
        return runnable
    return wrap_chain(runnable, options or WrapOptions())


register_adapter(_matches, wrap_runnable, name="langchain")

__all__ = ["wrap_runnable"]
