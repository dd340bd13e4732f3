"""accel's `run_in_executor` (adapters/langchain/sync_code.py): where langchain-core's modules hold
it once a chain is wrapped, and that it is stock's outside a wrapped app's call and in a stock
fallback (no engines: a retriever with only its sync method, awaited directly)."""

from __future__ import annotations

import asyncio
import threading

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda

import accel
from accel.scope import WrappedRun, stock_call, wrapped_run


class ThreadName(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        return [Document(page_content=threading.current_thread().name)]


def _thread(inside: str) -> str:
    async def run() -> str:
        if inside == "nothing":
            return (await ThreadName().ainvoke("q"))[0].page_content
        with wrapped_run(WrappedRun(app="test")):
            if inside == "a stock fallback":
                with stock_call():
                    return (await ThreadName().ainvoke("q"))[0].page_content
            return (await ThreadName().ainvoke("q"))[0].page_content

    return asyncio.run(run())


def test_langchain_core_modules_hold_the_replacement_which_wraps_stock_s() -> None:
    import langchain_core.retrievers
    import langchain_core.runnables.base
    import langchain_core.tools.structured
    from langchain_core.runnables import config

    accel.wrap(RunnableLambda(lambda x: x))
    replacement = config.run_in_executor
    assert replacement.__code__.co_filename.endswith("sync_code.py")  # accel's (it wears stock's name and module)
    for module in (langchain_core.retrievers, langchain_core.runnables.base, langchain_core.tools.structured):
        assert module.run_in_executor is replacement
    assert replacement.__wrapped__.__code__.co_filename.endswith("config.py")


def test_sync_code_goes_to_accels_pool_only_inside_a_wrapped_call() -> None:
    accel.wrap(RunnableLambda(lambda x: x))
    assert _thread("nothing").startswith("asyncio")
    assert _thread("a stock fallback").startswith("asyncio")
    assert not _thread("a wrapped call").startswith("asyncio")
