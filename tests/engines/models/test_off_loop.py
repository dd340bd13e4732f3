"""Model compute never blocks the event loop: a 10 ms heartbeat keeps ticking while a large
batch is embedded or reranked."""

from __future__ import annotations

import asyncio
import time

import pytest

from accel.engines.profile import chunk_texts, query_texts

pytestmark = pytest.mark.engines
MAX_GAP_S = 0.5


async def largest_heartbeat_gap(work) -> tuple[float, int]:
    stop = asyncio.Event()
    gaps: list[float] = []

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with asyncio.TaskGroup() as group:
        group.create_task(heartbeat())
        try:
            await work
        finally:
            stop.set()
    return max(gaps), len(gaps)


async def test_embedding_runs_off_the_loop(embedder):
    batch = chunk_texts(64) + query_texts(64)
    gap, beats = await largest_heartbeat_gap(embedder.run(batch))
    assert gap < MAX_GAP_S
    assert beats > 10  # the batch took long enough for the check to mean something


async def test_reranking_runs_off_the_loop(reranker):
    batch = list(zip(query_texts(48), chunk_texts(48), strict=True))
    gap, beats = await largest_heartbeat_gap(reranker.run(batch))
    assert gap < MAX_GAP_S
    assert beats > 10
