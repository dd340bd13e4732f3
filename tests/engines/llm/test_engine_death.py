"""The engine core process dying mid-request surfaces as EngineDied, now and for later calls."""

from __future__ import annotations

import asyncio

import psutil
import pytest

from accel.engines.base import GenerationRequest, SamplingParams
from accel.engines.errors import EngineDied
from accel.engines.llm.inprocess import VLLMEngine

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def _engine_cores(exclude: set[int]) -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True)
            if p.pid not in exclude and "EngineCore" in " ".join(p.cmdline())]


async def test_killed_engine_core_is_engine_died(tiny_model):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    llm = VLLMEngine(str(tiny_model), max_num_seqs=4)
    await llm.start()
    try:
        (core,) = _engine_cores(before)
        started = asyncio.Event()

        async def consume() -> None:
            long = SamplingParams(max_tokens=1500, extra={"ignore_eos": True})
            async for _ in llm.stream(GenerationRequest(prompt="def loop():", params=long)):
                started.set()

        task = asyncio.create_task(consume())
        await started.wait()
        core.kill()
        with pytest.raises(EngineDied, match="died"):
            await asyncio.wait_for(task, 60)
        with pytest.raises(EngineDied):
            await llm.run([GenerationRequest(prompt="x")])
    finally:
        await llm.stop()
