"""A wrapped graph's sync node functions, in an async run: in accel's worker pool, not the
caller loop's default executor.

LangGraph makes a sync function node a `RunnableCallable` whose async side is
`partial(run_in_executor, None, func)`, taken when the graph was built: under `ainvoke` /
`astream` every such node waits for one of the default executor's `min(32, CPU count + 4)`
threads (6 on a 2-core machine), so concurrent runs of a graph whose nodes call a model
synchronously queue for threads, not for engines. A partial taken before accel replaced
langchain-core's `run_in_executor` (`accel.adapters.langchain.sync_code`) holds stock's: the
drop-in's copy of such a node (`node.copy`, the user's graph untouched) holds the replacement,
which runs the same function with the same arguments and context in accel's pool during the
drop-in's runs (unless the loop's default executor is one the user set). Everything else a
graph run hands to the default executor through langchain-core (a `ToolNode`'s sync tools, a
sync retriever awaited in an async node) goes through the replacement already. Subgraphs keep
their own nodes as stock's.
"""

from __future__ import annotations

import copy
from functools import partial, wraps
from typing import Any

from accel.adapters.langchain import sync_code


def executor_backed(bound: Any) -> Any | None:
    """The sync function of a node runnable whose async side is LangGraph's
    `partial(run_in_executor, None, func)` with stock's `run_in_executor`, or None."""
    afunc = getattr(bound, "afunc", None)
    if (isinstance(afunc, partial) and afunc.func is sync_code.stock_run_in_executor() and len(afunc.args) == 2
            and afunc.args[0] is None and not afunc.keywords and callable(afunc.args[1])):
        return afunc.args[1]
    return None


def pool_sync_nodes(nodes: dict[str, Any]) -> list[str]:
    """Replace, in `nodes` (a copy of the graph's mapping), each sync function node whose async
    side holds stock's `run_in_executor` by a copy holding the replacement; the names replaced."""
    pooled = []
    for name, node in nodes.items():
        bound = getattr(node, "bound", None)
        func = executor_backed(bound)
        if func is None:
            continue
        runnable = copy.copy(bound)
        runnable.afunc = wraps(func)(partial(sync_code.pooled_run_in_executor(), None, func))  # as LangGraph builds it
        nodes[name] = node.copy({"bound": runnable})
        pooled.append(name)
    return pooled
