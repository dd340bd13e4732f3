"""HostedServerEngine: vLLM's OpenAI layer in this process, answering as the real server does.

Both engines serve the tiny offline model with the same `vllm serve` options (the hosted one
eager, which starts sooner and runs the same kernels): the session's server (`vllm_server`)
and one hosted here behind a base URL nothing listens on.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from accel.engines.base import GenerationRequest, SamplingParams
from accel.engines.errors import ModelNotFound, PromptTooLong
from accel.engines.llm.api_call import APICall
from accel.engines.llm.hosted import HostedServerEngine
from accel.engines.llm.openai_client import OpenAIServerEngine
from accel.hosting import HostingError, host_llm, hosted_llm, unhost_llm

pytestmark = [pytest.mark.engines, pytest.mark.slow]

NOWHERE = "http://hosted.invalid:8000/v1"
GREEDY = SamplingParams(max_tokens=12, temperature=0.0)


@pytest.fixture(scope="module")
async def hosted(tiny_model, vllm_server):
    # eager (no graph capture at start, about 8 s here): the same kernels, so the same tokens as the server
    engine = HostedServerEngine(NOWHERE, str(tiny_model), served_model_name=vllm_server.model, max_model_len=2048,
                                extra_args=["--enforce-eager"])
    await engine.start()
    yield engine
    await engine.stop()


@pytest.fixture(scope="module")
async def server(vllm_server):
    engine = OpenAIServerEngine(vllm_server.base_url, vllm_server.model)
    await engine.start()
    yield engine
    await engine.stop()


def _answer(content: bytes) -> dict:
    """A completion response without what differs per request (ids, timestamps)."""
    payload = json.loads(content)
    return {k: v for k, v in payload.items() if k not in ("id", "created", "system_fingerprint")}


async def test_hosted_engine_has_the_servers_limits(hosted, server):
    assert hosted.model == server.model
    assert hosted.max_model_len == 2048
    assert hosted.block_size == server.block_size  # read from the engine, not /metrics
    assert hosted.supports_priority  # started with --scheduling-policy priority, as `accel up` does


async def test_generations_equal_the_servers(hosted, server):
    ids = await server.tokenize("import heapq")
    requests = [
        GenerationRequest(prompt="import heapq", params=GREEDY),
        GenerationRequest(messages=[{"role": "user", "content": "Sort a list"}], params=GREEDY),
        GenerationRequest(prompt_token_ids=ids, params=GREEDY),
        GenerationRequest(prompt="def parse(text):", params=SamplingParams(max_tokens=20, temperature=0.8, seed=7)),
        GenerationRequest(prompt="The heap", params=SamplingParams(max_tokens=30, temperature=0.0, stop=(" the",))),
    ]
    mine, theirs = await hosted.run(requests), await server.run(requests)
    assert await hosted.tokenize("import heapq") == ids
    for a, b in zip(mine, theirs, strict=True):
        assert (a.text, a.prompt_tokens, a.completion_tokens, a.finish_reason) == \
               (b.text, b.prompt_tokens, b.completion_tokens, b.finish_reason)


async def test_forwarded_client_calls_equal_the_servers(hosted, server, vllm_server):
    """A framework client's own request (no max_tokens: the server's default applies) gives
    the same response body, and a wrong model name the same 404."""
    body = json.dumps({"model": vllm_server.model, "temperature": 0,
                       "messages": [{"role": "user", "content": "What is a heap?"}]}).encode()
    headers = (("content-type", "application/json"),)

    def call(base: str, payload: bytes) -> APICall:
        return APICall("POST", f"{base}/chat/completions", headers, payload)

    mine = await hosted.forward(call(NOWHERE, body))
    theirs = await server.forward(call(vllm_server.base_url, body))
    assert (mine.status, _answer(mine.content)) == (theirs.status, _answer(theirs.content))

    wrong = body.replace(vllm_server.model.encode(), b"no-such-model")
    mine = await hosted.forward(call(NOWHERE, wrong))
    theirs = await server.forward(call(vllm_server.base_url, wrong))
    assert mine.status == theirs.status == 404
    assert json.loads(mine.content) == json.loads(theirs.content)


async def test_streams_arrive_in_pieces_and_closing_aborts(hosted, monkeypatch):
    aborted: list[str] = []
    abort_done = asyncio.Event()
    abort = hosted._llm.abort

    async def recorded_abort(request_id, internal=False):
        await abort(request_id, internal=internal)
        aborted.append(request_id)
        abort_done.set()

    monkeypatch.setattr(hosted._llm, "abort", recorded_abort)
    request = GenerationRequest(prompt="a", params=SamplingParams(max_tokens=1900, temperature=0.0,
                                                                    extra={"ignore_eos": True}))
    pieces = 0
    stream = hosted.stream(request)
    async for chunk in stream:
        assert not chunk.finished
        pieces += 1
        if pieces == 5:
            break
    await stream.aclose()
    assert pieces == 5
    # Closing the response disconnected the in-process server, which aborts the request when
    # its generator is finalised (a loop turn later, as behind uvicorn): wait for that abort,
    # then nothing is left unfinished (1,900 tokens would take ~13 s to generate here).
    await asyncio.wait_for(abort_done.wait(), 60)
    assert len(aborted) == 1 and hosted._llm.output_processor.get_num_unfinished_requests() == 0


async def test_prompt_too_long_is_typed(hosted):
    with pytest.raises(PromptTooLong):
        await hosted.run([GenerationRequest(prompt="word " * 3000, params=GREEDY)])


def test_host_llm_checks_what_it_is_given(tmp_path, monkeypatch):
    with pytest.raises(HostingError, match="not an http"):
        host_llm("localhost:8000", None)
    with pytest.raises(ModelNotFound):
        host_llm("http://localhost:8000/v1", str(tmp_path / "missing-model"))
    hosted = host_llm("http://localhost:8000/v1/", str(tmp_path))
    try:
        assert hosted_llm("http://localhost:8000/v1") == hosted
        assert hosted_llm("http://localhost:8001/v1") is None
    finally:
        unhost_llm("http://localhost:8000/v1")
    assert hosted_llm("http://localhost:8000/v1") is None
    monkeypatch.setenv("ACCEL_HOST_LLM", f"http://127.0.0.1:9/v1={tmp_path}")
    assert hosted_llm("http://127.0.0.1:9/v1/").model == str(tmp_path)
    monkeypatch.setenv("ACCEL_HOST_LLM", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ACCEL_LLM_MODEL", "/models/x")
    assert hosted_llm("http://127.0.0.1:9/v1").model == "/models/x"
