"""The LLM twin speaks vLLM's OpenAI API with deterministic content and real token counts."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from accel.engines.twin.scheduler import Scheduler, Seq
from accel.engines.twin.content import OutputPlan
from accel.engines.twin.profile import LLMConfig
from accel.testing.proxy import RecordingProxy

CHAT = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "What is a twin?"}]


def _events(text: str) -> list[dict]:
    lines = [line[len("data: "):] for line in text.split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def _aborts(twin) -> asyncio.Event:
    """Set when the twin ends a request as aborted."""
    aborted = asyncio.Event()
    end = twin.engine.end

    def watch(seq: Seq, reason: str) -> None:
        end(seq, reason)
        if reason == "abort":
            aborted.set()

    twin.engine.end = watch
    return aborted


async def test_completion_is_deterministic_and_streams_the_same_text(make_twin) -> None:
    twin = await make_twin()
    body = {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 12, "ignore_eos": True}
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        first = (await client.post("/v1/completions", json=body)).json()
        again = (await client.post("/v1/completions", json=body)).json()
        other = (await client.post("/v1/completions", json={**body, "seed": 7})).json()
        streamed = await client.post("/v1/completions", json={**body, "stream": True, "stream_options": {"include_usage": True}})
        counted = (await client.post("/tokenize", json={"model": "tiny", "prompt": body["prompt"]})).json()
        text_back = (await client.post("/detokenize", json={"model": "tiny", "tokens": counted["tokens"]})).json()
    assert text_back["prompt"].endswith(body["prompt"])
    text = first["choices"][0]["text"]
    assert text and text == again["choices"][0]["text"] and text != other["choices"][0]["text"]
    assert first["choices"][0]["finish_reason"] == "length"
    assert first["usage"]["prompt_tokens"] == counted["count"] == len(twin.tokenizer(body["prompt"]).input_ids)
    assert first["usage"]["completion_tokens"] == 12
    events = _events(streamed.text)
    assert "".join(e["choices"][0]["text"] for e in events if e["choices"]) == text
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "length"
    assert events[-1]["usage"]["completion_tokens"] == 12 and events[-1]["choices"] == []


async def test_chat_streams_role_first_and_counts_the_template(make_twin) -> None:
    twin = await make_twin()
    body = {"model": "tiny", "messages": CHAT, "max_tokens": 8, "ignore_eos": True}
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        whole = (await client.post("/v1/chat/completions", json=body)).json()
        streamed = _events((await client.post("/v1/chat/completions", json={**body, "stream": True})).text)
    template = twin.tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=True)
    template = template["input_ids"] if hasattr(template, "keys") else template
    assert whole["usage"]["prompt_tokens"] == len(template)
    assert whole["object"] == "chat.completion" and whole["choices"][0]["message"]["role"] == "assistant"
    assert streamed[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = "".join(e["choices"][0]["delta"].get("content", "") for e in streamed[1:])
    assert content == whole["choices"][0]["message"]["content"]


async def test_a_shared_prefix_is_reported_cached(make_twin) -> None:
    twin = await make_twin()
    shared = " ".join(f"word{i}" for i in range(60))
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        cold = (await client.post("/v1/completions", json={"prompt": shared + " first", "max_tokens": 2})).json()
        warm = (await client.post("/v1/completions", json={"prompt": shared + " second", "max_tokens": 2})).json()
        metrics = (await client.get("/metrics")).text
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0 and cached % 16 == 0 and cached < warm["usage"]["prompt_tokens"]
    assert f'vllm:prompt_tokens_cached_total{{engine="0",model_name="tiny"}} {float(cached)}' in metrics
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        assert (await client.post("/reset_prefix_cache")).status_code == 200
        cold_again = (await client.post("/v1/completions", json={"prompt": shared + " third", "max_tokens": 2})).json()
    assert cold_again["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    for name in ("num_requests_running", "num_requests_waiting", "prompt_tokens_total", "generation_tokens_total",
                 "prefix_cache_hits_total", "kv_cache_usage_perc"):
        assert f"vllm:{name}{{" in metrics
    assert 'block_size="16"' in metrics
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        later = (await client.get("/metrics")).text
    cpu = [float(line.split()[1]) for text in (metrics, later) for line in text.splitlines()
           if line.startswith("process_cpu_seconds_total ")]
    assert len(cpu) == 2 and 0 < cpu[0] <= cpu[1], cpu  # the twin's process CPU, read around runs (twin_run.read)


async def test_stop_strings_eos_and_stop_reason(make_twin) -> None:
    twin = await make_twin()
    body = {"prompt": "Tell me a story", "max_tokens": 40, "ignore_eos": True}
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        full = (await client.post("/v1/completions", json=body)).json()["choices"][0]["text"]
        stop = full[len(full) // 2:len(full) // 2 + 3]
        cut = (await client.post("/v1/completions", json={**body, "stop": [stop]})).json()["choices"][0]
        streamed = _events((await client.post("/v1/completions", json={**body, "stop": stop, "stream": True})).text)
        natural = (await client.post("/v1/completions", json={"prompt": "Tell me a story", "max_tokens": 500})).json()
    assert cut["text"] == full[:full.index(stop)]
    assert (cut["finish_reason"], cut["stop_reason"]) == ("stop", stop)
    assert "".join(e["choices"][0]["text"] for e in streamed) == cut["text"]
    assert streamed[-1]["choices"][0]["stop_reason"] == stop
    choice = natural["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] is None  # EOS, before max_tokens
    assert natural["usage"]["completion_tokens"] < 500


async def test_priority_needs_priority_scheduling(make_twin) -> None:
    fcfs, ranked = await make_twin(), await make_twin(priority=True)
    body = {"prompt": "hi", "max_tokens": 2, "priority": 5}
    async with httpx.AsyncClient() as client:
        refused = await client.post(fcfs.listener.base_url + "/v1/completions", json=body)
        served = await client.post(ranked.listener.base_url + "/v1/completions", json=body)
    assert refused.status_code == 400 and "Priority scheduling" in refused.json()["error"]["message"]
    assert served.status_code == 200


def test_priority_scheduling_admits_the_lowest_value_first() -> None:
    config = LLMConfig(block_size=16, max_num_seqs=1, max_num_batched_tokens=64, num_gpu_blocks=100, max_model_len=256)
    plan = OutputPlan([1], {"ignore_eos": True}, [5], None)
    for priority_mode, first in ((False, "late"), (True, "urgent")):
        scheduler = Scheduler(config, priority=priority_mode)
        scheduler.add(Seq("late", [1, 2], 4, plan, priority=3))
        scheduler.add(Seq("urgent", [3, 4], 4, plan, priority=-1))
        step = scheduler.plan()
        assert step is not None and [seq.rid for seq, _ in step.prefill] == [first]


async def test_a_client_that_leaves_aborts_its_request(make_twin) -> None:
    twin = await make_twin()
    aborted = _aborts(twin)
    body = {"prompt": "go on forever", "max_tokens": 5000, "ignore_eos": True, "stream": True}
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        async with client.stream("POST", "/v1/completions", json=body) as response:
            async for _ in response.aiter_lines():
                break
    await asyncio.wait_for(aborted.wait(), 30)
    assert not twin.engine.scheduler.running and twin.engine.scheduler.counters.finished["abort"] == 1
    assert twin.engine.scheduler.counters.generation_tokens < 5000


async def test_accels_llm_engine_reads_the_twin_as_it_reads_vllm(make_twin, caplog: pytest.LogCaptureFixture) -> None:
    """accel's OpenAIServerEngine probes block size, context length and priority, renders chat
    prompts through /tokenize and /detokenize, and generates, all against the twin. A server
    that refuses priorities is named once in the log, with the remedy: accel's are lost there."""
    from accel.engines.base import GenerationRequest, SamplingParams
    from accel.engines.llm.openai_client import OpenAIServerEngine

    fcfs, ranked = await make_twin(), await make_twin(priority=True)
    with caplog.at_level(logging.WARNING, logger="accel.engines.llm.openai_client"):
        async with OpenAIServerEngine(fcfs.listener.base_url + "/v1", "tiny") as engine, \
                OpenAIServerEngine(ranked.listener.base_url + "/v1", "tiny") as by_priority, \
                OpenAIServerEngine(fcfs.listener.base_url + "/v1", "tiny"):  # the same server again: not said twice
            assert (engine.block_size, engine.max_model_len) == (16, 8192)
            assert not engine.supports_priority and by_priority.supports_priority
            rendered = await engine.render_chat(CHAT)
            [chat, plain] = await engine.run([
                GenerationRequest(messages=CHAT, params=SamplingParams(max_tokens=6, extra={"ignore_eos": True})),
                GenerationRequest(prompt=rendered, params=SamplingParams(max_tokens=6, extra={
                    "ignore_eos": True, "add_special_tokens": False}))])
    warned = [r.getMessage() for r in caplog.records if "does not schedule by priority" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(fcfs.listener.base_url) and "--scheduling-policy priority" in warned[0]
    assert "What is a twin?" in rendered
    assert chat.completion_tokens == plain.completion_tokens == 6 and chat.prompt_tokens == plain.prompt_tokens
    assert chat.text == plain.text  # the same prompt ids, however they came: the same answer


async def test_accels_whole_answers_are_its_streams_and_cancelling_one_aborts_it(make_twin) -> None:
    """`run` asks for whole answers (one JSON body, not an event per token): the same text,
    usage and cached tokens as `stream`; cancelling it closes the connection, and the server
    aborts the request as it does a stream's."""
    from accel.engines.base import GenerationRequest, SamplingParams
    from accel.engines.llm.openai_client import OpenAIServerEngine

    twin = await make_twin()
    aborted = _aborts(twin)
    prompt = " ".join(f"word{i}" for i in range(60))  # several 16-token blocks: the second request hits the cache
    request = GenerationRequest(prompt=prompt, params=SamplingParams(max_tokens=12, extra={"ignore_eos": True}))
    with RecordingProxy(twin.listener.base_url) as proxy:
        async with OpenAIServerEngine(proxy.url + "/v1", "tiny") as engine:
            [whole] = await engine.run([request])
            chunks = [chunk async for chunk in engine.stream(request)]
            [again] = await engine.run([request])
    sent = [r.body for r in proxy.recorder.take() if r.path == "/v1/completions" and r.body.get("prompt") == prompt]
    assert [body["stream"] for body in sent] == [False, True, False]
    streamed = chunks[-1].generation
    assert whole.text == streamed.text == again.text == "".join(c.delta for c in chunks) != ""
    assert (whole.prompt_tokens, whole.completion_tokens, whole.finish_reason) == \
        (streamed.prompt_tokens, 12, streamed.finish_reason) == (again.prompt_tokens, 12, "length")
    assert whole.cached_tokens == 0 and streamed.cached_tokens == again.cached_tokens > 0

    async with OpenAIServerEngine(twin.listener.base_url + "/v1", "tiny") as engine:
        forever = GenerationRequest(prompt="go on", params=SamplingParams(max_tokens=8000, extra={"ignore_eos": True}))
        running = asyncio.Event()
        finish = twin.engine.scheduler.finish

        def counting(step):  # set once the twin has generated some of it
            sampled = finish(step)
            if twin.engine.scheduler.counters.generation_tokens > 36:
                running.set()
            return sampled

        twin.engine.scheduler.finish = counting
        call = asyncio.ensure_future(engine.run([forever]))
        await asyncio.wait_for(running.wait(), 30)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(aborted.wait(), 30)
    assert twin.engine.scheduler.counters.finished["abort"] == 1 and not twin.engine.scheduler.running
    assert twin.engine.scheduler.counters.generation_tokens < 36 + 8000


async def test_tokens_a_lagging_client_has_not_taken_go_out_in_one_event(make_twin) -> None:
    """As vLLM merges the deltas its client has not read yet: text and finish as a prompt
    client sees them, in fewer events."""
    twin = await make_twin()
    body = {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 12, "ignore_eos": True}
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        whole = (await client.post("/v1/completions", json=body)).json()["choices"][0]["text"]
    gen = twin._generation(body, chat=False)
    finished = asyncio.Event()
    end = twin.engine.scheduler.end

    def ending(seq: Seq, reason: str) -> None:  # set when the scheduler ends this request
        end(seq, reason)
        if seq is gen.seq:
            finished.set()

    twin.engine.scheduler.end = ending
    deltas = twin._deltas(gen)
    first = await deltas.__anext__()  # the first step's text, then the client looks away
    await asyncio.wait_for(finished.wait(), 30)  # the engine runs every remaining step meanwhile
    assert gen.seq.finished == "length"
    rest = [delta async for delta in deltas]
    assert first + "".join(rest) == whole
    assert len(rest) == 1 and gen.finish_reason == "length"


def test_answers_end_at_a_drawn_eos_or_run_to_max_tokens_as_the_profile_says() -> None:
    vocab = list(range(10, 500))
    drawn = [OutputPlan([1, 2, 3, i], {}, vocab, eos_id=2).eos_at for i in range(50)]
    assert all(8 <= at <= 96 for at in drawn) and len(set(drawn)) > 5
    runs_on = OutputPlan([1, 2, 3], {}, vocab, eos_id=2, answer_tokens=None)  # a random-weight model
    assert runs_on.eos_at is None and 2 not in [runs_on.token(i) for i in range(300)]
    assert OutputPlan([1, 2, 3], {"ignore_eos": True}, vocab, eos_id=2, answer_tokens=(4, 4)).eos_at is None
    assert OutputPlan([1, 2, 3], {}, vocab, eos_id=2, answer_tokens=(4, 4)).eos_at == 4


def test_a_prompts_attended_pairs_are_half_its_square_however_it_is_chunked() -> None:
    """A CPU's prefill cost grows with the pairs the prompt attends (`Step.prefill_pairs`):
    n * n / 2 for n tokens, whether one step or chunks of the token budget take it, less the
    part a prefix-cache hit skips."""
    config = LLMConfig(block_size=16, max_num_seqs=4, max_num_batched_tokens=2048, num_gpu_blocks=1000,
                       max_model_len=4096)
    plan = OutputPlan([1], {"ignore_eos": True}, [5], None)
    scheduler = Scheduler(config)
    prompt = list(range(10, 3010))
    scheduler.add(Seq("a", prompt, 1, plan))
    pairs = []
    while (step := scheduler.plan()) is not None:
        pairs.append(step.prefill_pairs)
        scheduler.finish(step)
    assert len(pairs) == 2 and sum(pairs) == 3000 * 3000 / 2  # chunks of 2,048 and 952
    scheduler.add(Seq("b", prompt, 1, plan))  # 2,992 tokens (187 blocks) from the cache
    step = scheduler.plan()
    assert step is not None and step.prefill_pairs == 8 * (2992 + 4)
