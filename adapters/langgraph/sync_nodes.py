"""A wrapped graph's sync node functions, in an async run: in accel's worker pool, not the
caller loop's default executor.

LangGraph makes a sync function node a `RunnableCallable` whose async side is
`partial(run_in_executor, None, func)`: under `ainvoke` / `astream` every such node waits for
one of the default executor's `min(32, CPU count + 4)` threads (6 on a 2-core machine), so
concurrent runs of a graph whose nodes call a model synchronously queue for threads, not for
engines. The drop-in's copy of such a node (`node.copy`, the user's graph untouched) runs the
same function with the same arguments and context in `accel.caller.user_code_pool`, unless the
loop's default executor is one the user set. Subgraphs keep their own nodes as stock's.
"""

from __future__ import annotations

import asyncio
import copy
from functools import partial, wraps
from typing import Any

from accel.caller import default_executor_is_asyncios, in_user_pool


def executor_backed(bound: Any) -> Any | None:
    """The sync function of a node runnable whose async side is LangGraph's
    `partial(run_in_executor, None, func)`, or None."""
    from langchain_core.runnables.config import run_in_executor

    afunc = getattr(bound, "afunc", None)
    if (isinstance(afunc, partial) and afunc.func is run_in_executor and len(afunc.args) == 2
            and afunc.args[0] is None and not afunc.keywords and callable(afunc.args[1])):
        return afunc.args[1]
    return None


async def _pooled(func: Any, *args: Any, **kwargs: Any) -> Any:
    if default_executor_is_asyncios(asyncio.get_running_loop()):
        return await in_user_pool(func, *args, **kwargs)
    from langchain_core.runnables.config import run_in_executor

    return await run_in_executor(None, func, *args, **kwargs)


def pool_sync_nodes(nodes: dict[str, Any]) -> list[str]:
    """Replace, in `nodes` (a copy of the graph's mapping), each sync function node by a copy
    whose async side runs it by `_pooled`; the names replaced."""
    pooled = []
    for name, node in nodes.items():
        bound = getattr(node, "bound", None)
        func = executor_backed(bound)
        if func is None:
            continue
        runnable = copy.copy(bound)
        runnable.afunc = wraps(func)(partial(_pooled, func))
        nodes[name] = node.copy({"bound": runnable})
        pooled.append(name)
    return pooled
