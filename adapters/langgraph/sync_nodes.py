"""A wrapped graph's sync node functions, in an async run: in accel's worker pool, not the
caller loop's default executor.

LangGraph makes a sync function node a `RunnableCallable` whose async side is
`partial(run_in_executor, None, func)`: under `ainvoke` / `astream` every such node waits for
one of the default executor's `min(32, CPU count + 4)` threads (6 on a 2-core machine), so
concurrent runs of a graph whose nodes call a model synchronously queue for threads, not for
engines. The drop-in's copy of such a node (`node.copy`, the user's graph untouched) runs the
same function with the same arguments and context in `accel.caller.user_code_pool`, unless the
loop's default executor is one the user set. A prebuilt `ToolNode` awaits each tool's
`ainvoke`, which for a tool without async code is the default executor too: the drop-in's copy
of the node holds copies of those tools whose `ainvoke` is the wrapped LangChain call's
(`accel.adapters.langchain.sync_code`). Subgraphs keep their own nodes as stock's.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from functools import partial, wraps
from typing import Any

from accel.adapters.langchain import sync_code
from accel.caller import default_executor_is_asyncios, in_user_pool

log = logging.getLogger("accel.adapters.langgraph.sync_nodes")


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
        if func is not None:
            runnable = copy.copy(bound)
            runnable.afunc = wraps(func)(partial(_pooled, func))
            nodes[name] = node.copy({"bound": runnable})
            pooled.append(name)
            continue
        tool_node, tools = _pooled_tool_node(name, bound)
        if tool_node is not None:
            nodes[name] = node.copy({"bound": tool_node})
            pooled.append(f"{name} (tools {', '.join(tools)})")
    return pooled


def _pooled_tool(tool: Any) -> Any:
    """A copy of a tool without async code whose `ainvoke` is what a wrapped LangChain call runs
    for it (`sync_code.ainvoke_of`: the sync part in accel's pool unless the user set the
    loop's default executor); the user's tool runs inside."""
    async def ainvoke(input: Any, config: Any = None, **kwargs: Any) -> Any:
        return await sync_code.ainvoke_of(tool, asyncio.get_running_loop())(input, config, **kwargs)

    clone = copy.copy(tool)
    object.__setattr__(clone, "ainvoke", ainvoke)
    return clone


def _pooled_tool_node(name: str, bound: Any) -> tuple[Any | None, list[str]]:
    """A copy of a prebuilt `ToolNode` whose tools without async code are `_pooled_tool`s, and
    their names; (None, []) for any other node or a ToolNode with none."""
    try:
        from langgraph.prebuilt import ToolNode
    except ImportError:  # langgraph-prebuilt is a separate distribution
        return None, []
    if not isinstance(bound, ToolNode):
        return None, []
    tools = getattr(bound, "_tools_by_name", None)
    if not isinstance(tools, dict):
        log.warning("ToolNode %r: no _tools_by_name in this langgraph-prebuilt; its sync tools stay on the default "
                    "executor under ainvoke", name)
        return None, []
    sync = [tool_name for tool_name, tool in tools.items() if sync_code.function_tool(tool) or sync_code.sync_tool(tool)]
    if not sync:
        return None, []
    clone = copy.copy(bound)
    clone._tools_by_name = {tool_name: _pooled_tool(tool) if tool_name in sync else tool for tool_name, tool in tools.items()}
    clone.func, clone.afunc = clone._func, clone._afunc  # RunnableCallable keeps the methods bound to the original
    return clone, sync
