"""Sync user code of an async query: in accel's worker pool, not the caller loop's default executor.

Stock `ainvoke` runs a sync step (a `RunnableLambda` over a plain function, a document
compressor without async code, a retriever or tool with only its sync method, any runnable that
only has `invoke`) by handing it to the
running loop's default executor (`langchain_core.runnables.config.run_in_executor`), whose
size asyncio sets once: `min(32, CPU count + 4)` threads. Concurrent `ainvoke`s whose steps
block for a model's answer then wait for a thread, not for an engine: the examples' advanced
RAG (its refine loop is such a lambda, calling the model synchronously), 32 queries gathered on
one loop of this 2-core machine (6 threads) on the engine twins, took 5.8 s stock and 5.6 s
wrapped; with those steps in accel's pool, 1.6 s (docs/benchmarks-twin.md). A wrapped query
runs the same code with the same arguments, run manager and context, in accel's user-code pool
(`accel.caller`), and everything else of the step (its run's callbacks, a `Runnable` the
function returns) on the caller's loop, as stock does. A default executor the user set (`loop.set_default_executor`)
is theirs to size: then the step runs as stock's.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from functools import partial
from typing import Any

from accel.caller import default_executor_is_asyncios, in_user_pool


def ainvoke_of(runnable: Any, loop: asyncio.AbstractEventLoop) -> Any:
    """What runs `runnable.ainvoke(value, config, **kwargs)` for a query whose caller's loop is
    `loop`: stock's own, or the same with its sync code in accel's pool (`sync_lambda`,
    `invoke_only`, `function_tool`, `sync_retriever`, `sync_tool`) while the loop's default
    executor is asyncio's."""

    if not default_executor_is_asyncios(loop):
        return runnable.ainvoke
    if sync_lambda(runnable):
        return partial(ainvoke_lambda, runnable)
    if invoke_only(runnable) or function_tool(runnable):
        return partial(in_user_pool, runnable.invoke)
    if sync_retriever(runnable):
        return pooled_retriever(runnable).ainvoke
    if sync_tool(runnable):
        return pooled_tool(runnable).ainvoke
    return runnable.ainvoke


def invoke_only(runnable: Any) -> bool:
    """A runnable with `Runnable.ainvoke` itself: stock hands its whole `invoke` to the
    default executor."""
    from langchain_core.runnables import Runnable

    return type(runnable).ainvoke is Runnable.ainvoke


def sync_lambda(runnable: Any) -> bool:
    """A `RunnableLambda` whose `ainvoke` runs its plain (not generator) function in the
    default executor: no `afunc`, stock's own `ainvoke` and `_ainvoke`."""
    from langchain_core.runnables import RunnableLambda

    cls = type(runnable)
    func = getattr(runnable, "func", None)
    return (isinstance(runnable, RunnableLambda) and not hasattr(runnable, "afunc") and callable(func)
            and cls.ainvoke is RunnableLambda.ainvoke and cls._ainvoke is RunnableLambda._ainvoke
            and not inspect.isgeneratorfunction(func) and not inspect.iscoroutinefunction(func))


def sync_compressor(compressor: Any) -> bool:
    """A document compressor whose `acompress_documents` is the base class's: its sync
    `compress_documents` in the default executor."""
    from langchain_core.documents import BaseDocumentCompressor

    return type(compressor).acompress_documents is BaseDocumentCompressor.acompress_documents


async def ainvoke_lambda(runnable: Any, value: Any, config: Any, **kwargs: Any) -> Any:
    """Stock `RunnableLambda.ainvoke` of a sync function (`sync_lambda`), the function run by
    `in_user_pool`: the run opened and closed by stock's `_acall_with_config` on this loop, the
    function given the sync run manager and the child config, a returned `Runnable` awaited
    here with the recursion limit counted down, as stock's `_ainvoke` does."""
    from langchain_core.runnables import Runnable
    from langchain_core.runnables.config import call_func_with_variable_args, ensure_config, patch_config

    async def body(value: Any, run_manager: Any, config: Any, **kwargs: Any) -> Any:
        output = await in_user_pool(call_func_with_variable_args, runnable.func, value, config, run_manager.get_sync(), **kwargs)
        if isinstance(output, Runnable):
            limit = config["recursion_limit"]
            if limit <= 0:
                raise RecursionError(f"Recursion limit reached when invoking {runnable} with input {value}.")
            output = await output.ainvoke(value, patch_config(config, callbacks=run_manager.get_child(), recursion_limit=limit - 1))
        return output

    return await runnable._acall_with_config(body, value, ensure_config(config), **kwargs)


_NO_RUN_MANAGER = "BaseRetriever.__init_subclass__.<locals>._aget_relevant_documents"


def sync_retriever(runnable: Any) -> bool:
    """A retriever under stock `ainvoke` whose `_aget_relevant_documents` is the base class's
    (or the one `BaseRetriever.__init_subclass__` writes for a sync method without
    `run_manager`): its `_get_relevant_documents` in the default executor."""
    from langchain_core.retrievers import BaseRetriever

    cls = type(runnable)
    if not isinstance(runnable, BaseRetriever) or cls.ainvoke is not BaseRetriever.ainvoke:
        return False
    aget = cls._aget_relevant_documents
    return aget is BaseRetriever._aget_relevant_documents or getattr(aget, "__qualname__", "") == _NO_RUN_MANAGER


def pooled_retriever(retriever: Any) -> Any:
    """A copy of `retriever` (`sync_retriever`) whose `_aget_relevant_documents` is the base
    class's with `in_user_pool` for the default executor: the same signature, the retriever's
    own sync method (state it keeps stays on the user's object), stock's `ainvoke` around it."""
    sync = retriever._get_relevant_documents
    if type(retriever)._aget_relevant_documents.__qualname__ == _NO_RUN_MANAGER:
        async def aget(query: str) -> Any:
            return await in_user_pool(sync, query)
    else:
        async def aget(query: str, *, run_manager: Any) -> Any:  # type: ignore[misc]
            return await in_user_pool(sync, query, run_manager=run_manager.get_sync())
    clone = copy.copy(retriever)
    object.__setattr__(clone, "_aget_relevant_documents", aget)
    return clone


def function_tool(tool: Any) -> bool:
    """A `StructuredTool` / `Tool` without a coroutine (`@tool` over a plain function): stock's
    `ainvoke` hands its whole `invoke` to the default executor."""
    from langchain_core.tools import StructuredTool, Tool

    cls = type(tool)
    return ((cls.ainvoke is StructuredTool.ainvoke or cls.ainvoke is Tool.ainvoke)
            and getattr(tool, "coroutine", None) is None)


def sync_tool(tool: Any) -> bool:
    """A `BaseTool` subclass with `_run` only: stock's `ainvoke` runs the tool's run on the loop
    and `_run` in the default executor (`BaseTool._arun`)."""
    from langchain_core.tools import BaseTool

    cls = type(tool)
    return (isinstance(tool, BaseTool) and cls.ainvoke is BaseTool.ainvoke and cls.arun is BaseTool.arun
            and cls._arun is BaseTool._arun)


def pooled_tool(tool: Any) -> Any:
    """A copy of `tool` (`sync_tool`) whose `_arun` is `BaseTool._arun` with `in_user_pool` for
    the default executor: stock's `arun` around it (it reads `_run`'s signature, not `_arun`'s,
    to pass the run manager and the config), the tool's own `_run` inside."""
    async def arun(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("run_manager") and "run_manager" in inspect.signature(tool._run).parameters:
            kwargs["run_manager"] = kwargs["run_manager"].get_sync()
        return await in_user_pool(tool._run, *args, **kwargs)

    clone = copy.copy(tool)
    object.__setattr__(clone, "_arun", arun)
    return clone
