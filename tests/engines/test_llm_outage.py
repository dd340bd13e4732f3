"""A vLLM server dying under load, with `accel.wrap` on the naive-RAG example.

Regression (issue 14b): accel returned the errors of 8 concurrent queries 9.45 s after the
kill where stock took 0.14 s. Killed requests must fail fast and typed at the engine, queries
while the server is down must fail fast, and the same wrapped app must answer again, as
stock does, once the server is back on the same port.

The outage itself is put where the test says by a fault proxy (`accel.testing.faults`): every
request is mid-answer when the "server" dies, whatever the machine's load. Racing a real kill
against the streams failed on loaded machines four times, in both directions. One real kill
stays, asserting only what holds whatever the timing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from accel.engines.base import GenerationRequest, SamplingParams
from accel.engines.errors import EngineDied, EngineUnavailable
from accel.engines.llm.openai_client import OpenAIServerEngine
from accel.engines.llm.server import free_port, group_members, launch_server, stop_pid
from accel.testing.faults import FaultProxy

pytestmark = [pytest.mark.engines, pytest.mark.slow]
pytest.importorskip("langchain_postgres")

LONG = SamplingParams(max_tokens=1500, extra={"ignore_eos": True})
EVENTS_BEFORE_THE_KILL = 10


def _stream_ending(engine: OpenAIServerEngine, prompt: str, received: list[int], i: int):
    async def consume() -> str:
        async for chunk in engine.stream(GenerationRequest(prompt=prompt, params=LONG)):
            received[i] += 1
            if chunk.finished:
                return "complete"
        return "cut off silently"
    return consume()


async def test_requests_cut_mid_answer_fail_fast_and_the_same_objects_recover(vllm_server, postgres_factory):
    import accel
    from accel.engines.embeddings import packaged_minilm_path
    from accel.engines.offline.reranker import build_reranker
    from accel.examples.corpus import pydoc_documents
    from accel.examples.langchain.models import build_index
    from accel.examples.langchain.naive_rag import build_app
    from accel.examples.stack import StackConfig

    with FaultProxy(vllm_server.base_url) as proxy:
        engine = OpenAIServerEngine(proxy.url + "/v1", vllm_server.model)
        try:
            await engine.start()
            config = StackConfig(proxy.url + "/v1", vllm_server.model, postgres_factory("accel-outage-"),
                                 str(packaged_minilm_path()), str(build_reranker()), max_tokens=16,
                                 context_window=2048)
            store = await asyncio.to_thread(build_index, config, pydoc_documents(["heapq", "bisect"]), "outage")
            wrapped = accel.wrap(build_app(config, store))
            question = {"question": "How do I push an item onto a heap?"}
            expected = await asyncio.to_thread(build_app(config, store).invoke, question)
            assert await asyncio.to_thread(wrapped.invoke, question) == expected

            # 8 long wrapped queries and 8 engine streams, each held mid-answer, then the kill
            proxy.hold_generations(after_events=EVENTS_BEFORE_THE_KILL)
            long_app = accel.wrap(build_app(replace(config, max_tokens=1500), store))
            pool = ThreadPoolExecutor(8)
            queries = [asyncio.wrap_future(pool.submit(long_app.invoke, {"question": f"heap {i}"}))
                       for i in range(8)]
            received = [0] * 8
            streams = [asyncio.create_task(_stream_ending(engine, f"def f{i}():", received, i)) for i in range(8)]
            held = await asyncio.to_thread(proxy.wait_held, 16, 300)
            assert held == 16, f"only {held} of 16 requests reached the server in 300 s"
            killed = time.perf_counter()
            proxy.kill()
            stream_errors = await asyncio.wait_for(asyncio.gather(*streams, return_exceptions=True), 30)
            query_results = await asyncio.wait_for(asyncio.gather(*queries, return_exceptions=True), 30)
            failed_after = time.perf_counter() - killed
            pool.shutdown()
            assert all(isinstance(e, EngineDied) for e in stream_errors), stream_errors
            assert all(0 < n <= EVENTS_BEFORE_THE_KILL for n in received), received  # cut mid-answer
            assert all(isinstance(r, BaseException) for r in query_results), query_results
            assert failed_after < 5, f"errors came {failed_after:.1f} s after the kill (the bug: 9.45 s)"

            began = time.perf_counter()  # down: a request fails at once, typed, naming the remedy
            with pytest.raises(EngineUnavailable) as caught:
                await engine.run([GenerationRequest(prompt="x", params=SamplingParams(max_tokens=2))])
            assert time.perf_counter() - began < 2 and "accel up" in caught.value.remedy
            began = time.perf_counter()
            with pytest.raises(Exception):
                await asyncio.to_thread(wrapped.invoke, question)
            assert time.perf_counter() - began < 5

            proxy.revive()  # back on the same port
            after = await engine.run([GenerationRequest(prompt="x = 1", params=SamplingParams(max_tokens=4))])
            assert after[0].completion_tokens == 4  # the same engine object, not restarted
            assert await asyncio.to_thread(wrapped.invoke, question) == expected  # the same wrapped app
        finally:
            await engine.stop()


async def test_a_real_kill_fails_typed_and_leaves_no_process(tiny_model, tmp_path):
    """SIGKILL of a real server's process group with streams in flight. Whether a stream was
    cut or had finished depends on timing; what must hold either way: none ends silently cut,
    none hangs, new requests fail at once, and the same engine object answers once a server is
    back on the port."""
    port = free_port()
    log = tmp_path / "vllm.log"
    server = await launch_server(str(tiny_model), port=port, served_model_name="tiny", max_model_len=2048,
                                 log_path=log)
    pids = [server.pid]
    engine = OpenAIServerEngine(server.base_url, "tiny", connect_timeout_s=30)
    try:
        await engine.start()
        received = [0] * 4
        streams = [asyncio.create_task(_stream_ending(engine, f"def g{i}():", received, i)) for i in range(4)]
        os.killpg(server.pid, signal.SIGKILL)
        ends = await asyncio.wait_for(asyncio.gather(*streams, return_exceptions=True), 60)
        assert all(e == "complete" or isinstance(e, (EngineDied, EngineUnavailable)) for e in ends), ends
        await asyncio.to_thread(stop_pid, server.pid, 10)
        with pytest.raises(EngineUnavailable):
            await engine.run([GenerationRequest(prompt="x", params=SamplingParams(max_tokens=2))])

        server = await launch_server(str(tiny_model), port=port, served_model_name="tiny", max_model_len=2048,
                                     log_path=log)
        pids.append(server.pid)
        after = await engine.run([GenerationRequest(prompt="x = 1", params=SamplingParams(max_tokens=4))])
        assert after[0].completion_tokens == 4
    finally:
        await engine.stop()
        for pid in pids:
            await asyncio.to_thread(stop_pid, pid)
    assert all(group_members(pid) == [] for pid in pids)
