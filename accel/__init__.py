"""accel: drop-in acceleration for LangChain and LlamaIndex apps on locally hosted engines.

    chain = accel.wrap(chain)
    answers = accel.batch(accel.wrap(query_engine), questions)   # one consolidated batch
    accel.host_llm("http://localhost:8000/v1", model_dir)        # no vLLM server needed

Importing `accel` is light: the runtime, the engines and the framework adapters load on
first use.
"""

from __future__ import annotations

from typing import Any

from accel.hosting import host_llm
from accel.options import WrapOptions
from accel.wrap import register_adapter, wrap

__all__ = ["WrapOptions", "abatch", "batch", "get_session", "host_llm", "register_adapter", "shutdown", "wrap"]


def batch(app: Any, inputs: Any, **options: Any) -> list[Any]:
    """Run `app` over `inputs` as one batch whose identical engine requests run once
    (`accel.consolidate.batch`); for query engines, which have no `batch` of their own."""
    from accel.consolidate import batch as _batch

    return _batch(app, inputs, **options)


async def abatch(app: Any, inputs: Any, **options: Any) -> list[Any]:
    """`batch` for async callers (`accel.consolidate.abatch`)."""
    from accel.consolidate import abatch as _abatch

    return await _abatch(app, inputs, **options)


def get_session(**options: Any) -> Any:
    """The shared `accel.session.Session` for these options (see `accel.session.get_session`)."""
    from accel.session import get_session as _get_session

    return _get_session(**options)


def shutdown() -> None:
    """Stop every accel session of this process: runtime, engines and loop thread."""
    import sys

    session = sys.modules.get("accel.session")
    if session is not None:
        session.shutdown()
