"""The vLLM OpenAI server, started by launch_server, driven through OpenAIServerEngine.

The module's server ends with a real SIGKILL (the last test): one launch serves both what a
served server does and how its death shows. Its graceful stop (`stop_pid`'s SIGTERM path) is
checked where `accel down` stops a stack (`tests/cli/test_stack_cli.py`)."""

from __future__ import annotations

import asyncio
import os
import signal

import psutil

import pytest

from accel.engines.base import GenerationRequest, SamplingParams
from accel.engines.errors import EngineDied, EngineError, EngineUnavailable, PromptTooLong
from accel.engines.llm.openai_client import OpenAIServerEngine
from accel.engines.llm.server import free_port, group_members, launch_server, served_name, stop_pid
from accel.testing.faults import FaultProxy

from .conftest import prompt_of_about

pytestmark = [pytest.mark.engines, pytest.mark.slow]

GREEDY = SamplingParams(max_tokens=12, temperature=0.0)


@pytest.fixture(scope="module")
async def server(tiny_model, tmp_path_factory):
    # served as "tiny", as the session's server is: the last test revives this port with a
    # proxy to that one, for the same client object
    # eager: no graph capture at start (about 8 s here); these tests decode little
    handle = await launch_server(str(tiny_model), max_model_len=2048, served_model_name="tiny",
                                 log_path=tmp_path_factory.mktemp("server") / "vllm.log", extra_args=["--enforce-eager"])
    yield handle
    await handle.stop()


@pytest.fixture(scope="module")
async def client(server):
    engine = OpenAIServerEngine(server.base_url, server.model)
    await engine.start()
    yield engine
    await engine.stop()


def test_a_server_is_named_after_its_model_directory_by_default(tiny_model):
    assert served_name(str(tiny_model)) == "llm-tiny"
    assert served_name("tiny") == "tiny"  # a name, not a directory: as given


async def test_server_reports_its_context_window(client, server):
    assert server.model == "tiny"
    assert client.max_model_len == 2048
    assert client.block_size == 128  # vLLM-CPU's prefix-cache block, read from /metrics
    assert group_members(server.pid)


def test_pid_is_the_api_server_leading_its_group(server):
    """Regression (issue 14c): the pid was a `sh` wrapper, whose death left the server running."""
    process = psutil.Process(server.pid)
    assert "vllm.entrypoints.openai.api_server" in process.cmdline()
    assert os.getpgid(server.pid) == server.pid
    names = {psutil.Process(pid).name() for pid in group_members(server.pid)}
    assert "tee" in names and len(names) >= 2  # tee writes the log; EngineCore serves


async def test_completions_chat_and_token_ids(client):
    ids = await client.tokenize("import heapq")
    text, chat, by_ids = await client.run([
        GenerationRequest(prompt="import heapq", params=GREEDY),
        GenerationRequest(messages=[{"role": "user", "content": "Sort a list"}], params=GREEDY),
        GenerationRequest(prompt_token_ids=ids, params=GREEDY),
    ])
    assert text.completion_tokens == 12 and text.prompt_tokens == len(ids)
    assert by_ids.text == text.text
    rendered = await client.render_chat([{"role": "user", "content": "Sort a list"}])
    assert rendered.endswith("<|assistant|>\n") and "Sort a list" in rendered
    assert chat.prompt_tokens == len(await client.tokenize(rendered, add_special_tokens=False))


async def test_stream_deltas_add_up_and_usage_arrives(client):
    chunks = [c async for c in client.stream(GenerationRequest(prompt="class Queue:", params=GREEDY))]
    final = chunks[-1]
    assert final.finished and final.generation.completion_tokens == 12
    assert "".join(c.delta for c in chunks) == final.generation.text
    assert final.generation.finish_reason == "length"


async def test_priority_is_accepted(client):
    low, high = await client.run([
        GenerationRequest(prompt="a", params=GREEDY, priority=5),
        GenerationRequest(prompt="a", params=GREEDY, priority=-5),
    ])
    assert low.text == high.text


async def test_cached_tokens_are_reported_after_a_prefix_warm_up(client, corpus_text):
    prompt = prompt_of_about(corpus_text, 420, offset=777)
    ids = await client.tokenize(prompt)
    await client.run([GenerationRequest(prompt_token_ids=ids[:256], params=SamplingParams(max_tokens=1))])
    full = (await client.run([GenerationRequest(prompt=prompt, params=SamplingParams(max_tokens=4))]))[0]
    assert full.cached_tokens >= 256 and full.cached_tokens < full.prompt_tokens


async def test_context_overflow_is_prompt_too_long(client, corpus_text):
    with pytest.raises(PromptTooLong):
        await client.run([GenerationRequest(prompt=prompt_of_about(corpus_text, 3000))])
    with pytest.raises(PromptTooLong):
        await client.run([GenerationRequest(prompt_token_ids=list(range(10, 2000)),
                                            params=SamplingParams(max_tokens=100))])


async def test_other_http_errors_carry_the_server_message(client, server):
    wrong = OpenAIServerEngine(server.base_url, "no-such-model")
    wrong._client = client._client  # share the connection pool; start() would fail the same way
    with pytest.raises(EngineError, match="no-such-model") as caught:
        await wrong.run([GenerationRequest(prompt="x")])
    assert not isinstance(caught.value, PromptTooLong)


async def test_abort_and_cancel_close_the_stream(client):
    long = SamplingParams(max_tokens=1500, extra={"ignore_eos": True})
    chunks = 0
    with pytest.raises(asyncio.CancelledError):
        async for _ in client.stream(GenerationRequest(prompt="while True:", request_id="srv-abort", params=long)):
            chunks += 1
            if chunks == 1:
                await client.abort("srv-abort")
    assert chunks < 1500
    streaming = asyncio.Event()

    async def generate() -> None:  # `generate`, with word of its first chunk
        async for _ in client.stream(GenerationRequest(prompt="def f():", params=long)):
            streaming.set()

    task = asyncio.create_task(generate())
    await asyncio.wait_for(streaming.wait(), 120)  # cancelled mid-answer, whatever the machine's load
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The server keeps serving normally afterwards.
    after = await client.run([GenerationRequest(prompt="x = 1", params=GREEDY)])
    assert after[0].completion_tokens == 12


async def test_closed_port_is_engine_unavailable():
    engine = OpenAIServerEngine(f"http://127.0.0.1:{free_port()}/v1", "llm-tiny")
    with pytest.raises(EngineUnavailable, match="accel up"):
        await engine.start()
    await engine.stop()


async def test_launch_of_a_missing_model_is_engine_died_with_the_log(tmp_path):
    with pytest.raises(EngineDied, match="log tail"):
        await launch_server(str(tmp_path / "missing-model"), log_path=tmp_path / "fail.log")


LONG = SamplingParams(max_tokens=1500, extra={"ignore_eos": True})


async def _stream_ending(engine: OpenAIServerEngine, prompt: str) -> str:
    async for chunk in engine.stream(GenerationRequest(prompt=prompt, params=LONG)):
        if chunk.finished:
            return "complete"
    return "cut off silently"


async def test_a_real_kill_fails_typed_and_leaves_no_process(server, vllm_server):
    """Runs last in this module (file order): SIGKILL of the server's process group with
    streams in flight. Whether a stream was cut or had finished depends on timing; what must
    hold either way: none ends silently cut, none hangs, new requests fail at once, and the same
    engine object answers once a server is back on the port (the session's server, through a
    proxy listening on the dead one's port: a second launch would take half a minute and show
    the client nothing more)."""
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    engine = OpenAIServerEngine(server.base_url, "tiny", connect_timeout_s=30)
    try:
        await engine.start()
        streams = [asyncio.create_task(_stream_ending(engine, f"def g{i}():")) for i in range(4)]
        os.killpg(server.pid, signal.SIGKILL)
        ends = await asyncio.wait_for(asyncio.gather(*streams, return_exceptions=True), 60)
        assert all(e == "complete" or isinstance(e, (EngineDied, EngineUnavailable)) for e in ends), ends
        await asyncio.to_thread(stop_pid, server.pid, 10)
        with pytest.raises(EngineUnavailable):
            await engine.run([GenerationRequest(prompt="x", params=SamplingParams(max_tokens=2))])

        with FaultProxy(vllm_server.base_url, port=port):
            after = await engine.run([GenerationRequest(prompt="x = 1", params=SamplingParams(max_tokens=4))])
        assert after[0].completion_tokens == 4
    finally:
        await engine.stop()
        await server.stop()
    assert group_members(server.pid) == []
