"""`VectorStoreWriter`: the Ingest engine for a LlamaIndex vector store, writing through the
store's own `add()`.

accel's `PgVectorEngine` writes accel's own tables; a LlamaIndex app reads the rows its store
wrote (`data_<table>` with its id, text, metadata_ and node_id columns). Writing through
`store.add(nodes)` keeps that layout by construction. One request is one ingestion's whole
node list, so each ingestion stays one `add()` call (one transaction on PGVectorStore: all of
its rows or none); a batch of requests from concurrent ingestions is written in one hop to
the worker thread, and a failing ingestion fails alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from accel.engines.base import Engine, Health
from accel.engines.errors import EmptyBatch

NodeList = list[Any]


class VectorStoreWriter(Engine[NodeList, "list[str] | BaseException"]):
    """Runs `store.add(nodes)` in one worker thread (never on the event loop). A request's
    result is the ids `add()` returned, or the exception it raised (re-raised by the Ingest
    op of that ingestion only)."""

    kind = "vectordb"

    def __init__(self, store: Any) -> None:
        self.store = store
        self.name = f"writer:{type(store).__name__}"
        self._executor: ThreadPoolExecutor | None = None

    async def start(self) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accel-ingest")

    async def stop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self._executor = None

    async def run(self, batch: Sequence[NodeList]) -> list[list[str] | BaseException]:
        if len(batch) == 0:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one node list")
        await self.start()
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._add_all, list(batch))

    def _add_all(self, batch: list[NodeList]) -> list[list[str] | BaseException]:
        results: list[list[str] | BaseException] = []
        for nodes in batch:
            try:
                results.append(list(self.store.add(nodes)))
            except Exception as err:  # returned to its own ingestion, which re-raises it
                results.append(err)
        return results

    async def health(self) -> Health:
        """Writing a probe row would change the app's table, so health only reports readiness."""
        return Health(self.name, self._executor is not None, "writes through the store's own add()")


def raise_failures(results: list[list[str] | BaseException]) -> list[list[str]]:
    """The Ingest op's output: the ids, or the store's own exception for this ingestion."""
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]
