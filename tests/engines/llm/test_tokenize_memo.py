"""OpenAIServerEngine remembers token ids and rendered chat prompts: prefix warm-ups ask for
the same static heads every query, and each answer is a round trip to the server's API
process. The server here is httpx's MockTransport answering as vLLM's /tokenize does."""

from __future__ import annotations

import json

import httpx

from accel.engines.llm import openai_client
from accel.engines.llm.openai_client import OpenAIServerEngine


def _engine(calls: list[str]) -> OpenAIServerEngine:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(request.url.path)
        if request.url.path == "/tokenize":
            text = body.get("prompt") or json.dumps(body.get("messages"))
            return httpx.Response(200, json={"tokens": [ord(c) for c in text] + ([1] if body["add_special_tokens"] else [])})
        return httpx.Response(200, json={"prompt": "".join(chr(t) for t in body["tokens"])})

    engine = OpenAIServerEngine("http://server.test/v1", "m")
    engine._client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return engine


async def test_same_text_is_tokenized_once() -> None:
    calls: list[str] = []
    engine = _engine(calls)
    first = await engine.tokenize("static head")
    first.append(99)  # callers own their copy
    assert await engine.tokenize("static head") == [ord(c) for c in "static head"] + [1]
    assert await engine.tokenize("static head", add_special_tokens=False) == [ord(c) for c in "static head"]
    assert calls == ["/tokenize", "/tokenize"]  # one per (text, special tokens)
    messages = [{"role": "system", "content": "You answer."}]
    assert await engine.render_chat(messages) == await engine.render_chat([dict(m) for m in messages])
    assert calls.count("/detokenize") == 1


async def test_the_memory_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(openai_client, "MEMO_ENTRIES", 2)
    calls: list[str] = []
    engine = _engine(calls)
    for text in ("a", "b", "a", "c", "b"):
        await engine.tokenize(text)
    assert len(calls) == 4  # "a" again hit; "b" had been dropped for "c"
