"""Sync user code of a wrapped async call: in accel's worker pool, not the caller loop's default executor.

LangChain hands an async call's sync code to the running loop's default executor through one
function, `langchain_core.runnables.config.run_in_executor(None or a config, func, ...)`: a
`RunnableLambda` over a plain function, a runnable with `invoke` only, a compressor, retriever,
vector store or tool without async code (`@tool` over a plain function; a LangGraph `ToolNode`
awaits each tool's `ainvoke`). asyncio sizes that executor once, `min(32, CPU count + 4)`
threads (6 on a 2-core machine), so concurrent `ainvoke`s whose steps block (a lambda calling a
model synchronously, a retriever over a remote search) queue for threads, not for engines: the
examples' advanced RAG, 32 `ainvoke`s gathered on the engine twins, took 5.7 s stock and 5.6 s
wrapped while the wrapped call kept that code where stock runs it (docs/benchmarks-twin.md).

`install()` (at the first `accel.wrap` of a chain or graph) puts `run_in_executor` below in
place of langchain-core's, in its module and wherever a loaded module imported it by name. It
is stock's function except inside a wrapped app's call (`accel.scope.current_run()`, not a stock
fallback) on a loop whose default executor is asyncio's own: there `func` runs in
`accel.caller.user_code_pool` (64 threads), in a copy of the context as stock copies it, and
everything around it (the run's callbacks, a `Runnable` a lambda returns) stays on the caller's
loop as stock's code has it. Sync code nested in an opaque step is reached too (a custom
retriever inside `{"context": retriever | format_docs, ...}`). A default executor the user set
(`loop.set_default_executor`) is theirs to size: it runs the code then.

Not reached: a reference taken before `install()` (LangGraph's sync node functions are
`partial(run_in_executor, None, func)`: `adapters/langgraph/sync_nodes.py` rebinds those in the
drop-in's copies of the nodes); LangChain's async callback managers hand sync handlers to
`loop.run_in_executor` directly (stock).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable
from functools import wraps
from typing import Any

from accel.caller import default_executor_is_asyncios, in_user_pool
from accel.scope import current_run, in_stock_call

log = logging.getLogger("accel.adapters.langchain.sync_code")

_lock = threading.Lock()
_stock: list[Callable[..., Any]] = []  # langchain-core's own run_in_executor, once installed


def in_wrapped_call() -> bool:
    """Whether sync code handed to the default executor here goes to accel's pool instead."""
    return (current_run() is not None and not in_stock_call()
            and default_executor_is_asyncios(asyncio.get_running_loop()))


def install() -> None:
    """Put `run_in_executor` in place of langchain-core's (its module, and every loaded module
    holding it by name). Idempotent."""
    from langchain_core.runnables import config

    with _lock:
        if _stock:
            return
        stock = config.run_in_executor
        _stock.append(stock)
        pooled = wraps(stock)(_run_in_executor)
        replaced = []
        for name, module in list(sys.modules.items()):
            try:
                namespace = vars(module)
                if namespace.get("run_in_executor") is stock:
                    setattr(module, "run_in_executor", pooled)
                    replaced.append(name)
            except Exception:  # noqa: BLE001 - not a module (sys.modules may hold any object): not ours to patch
                continue
    log.debug("run_in_executor replaced in %d modules: %s", len(replaced), ", ".join(replaced))


def stock_run_in_executor() -> Callable[..., Any]:
    """langchain-core's own `run_in_executor`, which a reference taken before `install()` holds."""
    install()
    return _stock[0]


def pooled_run_in_executor() -> Callable[..., Any]:
    """The `run_in_executor` a reference taken before `install()` is rebound to."""
    install()
    from langchain_core.runnables import config

    return config.run_in_executor


async def _run_in_executor(executor_or_config: Any, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """langchain-core's `run_in_executor` (an executor, or None / a config for the loop's
    default one), with the default executor's work of a wrapped call in accel's pool."""
    if (executor_or_config is None or isinstance(executor_or_config, dict)) and in_wrapped_call():
        return await in_user_pool(func, *args, **kwargs)
    return await _stock[0](executor_or_config, func, *args, **kwargs)
