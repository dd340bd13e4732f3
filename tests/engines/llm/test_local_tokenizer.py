"""OpenAIServerEngine tokenizes prompt heads in process with the served model's own tokenizer
(found through vLLM's `/v1/models` card, `root`), once it tokenized probe texts as the server
does; a tokenizer that disagrees is not used and the engine keeps asking the server."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from accel.engines.llm import local_tokenizer
from accel.engines.llm.local_tokenizer import PROBES, LocalTokenizer
from accel.engines.llm.openai_client import OpenAIServerEngine
from accel.engines.llm.server import ServerHandle
from accel.testing.proxy import RecordingProxy

from .conftest import prompt_of_about


async def test_a_tokenizer_that_differs_from_the_servers_is_not_used(tiny_model: Path, caplog: pytest.LogCaptureFixture) -> None:
    reference = _unverified(tiny_model)

    async def same(text: str, special: bool) -> list[int]:
        return await reference.encode(text, add_special_tokens=special)

    async def one_more_special_token(text: str, special: bool) -> list[int]:
        ids = await reference.encode(text, add_special_tokens=special)
        return ids + [0] if special else ids

    agreed = await LocalTokenizer.verified(str(tiny_model), same)
    assert agreed is not None
    agreed.close()
    before = local_tokenizer.disagreements[str(tiny_model)]
    with caplog.at_level(logging.WARNING, logger="accel.engines.llm.local_tokenizer"):
        assert await LocalTokenizer.verified(str(tiny_model), one_more_special_token) is None
    assert local_tokenizer.disagreements[str(tiny_model)] == before + 1
    assert "keep asking the server's /tokenize" in caplog.text
    assert await LocalTokenizer.verified(str(tiny_model / "missing"), same) is None  # no tokenizer.json there
    reference.close()


def _unverified(model: Path) -> LocalTokenizer:
    from tokenizers import Tokenizer

    return LocalTokenizer(Tokenizer.from_file(str(model / "tokenizer.json")))


@pytest.mark.engines
async def test_the_served_models_tokenizer_answers_as_the_server_without_round_trips(vllm_server: ServerHandle, corpus_text: str) -> None:
    texts = [prompt_of_about(corpus_text, n, offset=n) for n in (40, 300, 900)] + list(PROBES)
    with RecordingProxy(vllm_server.base_url.removesuffix("/v1")) as proxy:
        engine = OpenAIServerEngine(proxy.url + "/v1", vllm_server.model)
        await engine.start()
        try:
            assert engine._local is not None  # the session's server serves the tiny model's directory
            proxy.recorder.take()
            ours = [await engine.tokenize(t, add_special_tokens=s) for t in texts for s in (True, False)]
            assert not [r.path for r in proxy.recorder.take() if r.path == "/tokenize"]
        finally:
            await engine.stop()
    async with httpx.AsyncClient() as client:
        root = vllm_server.base_url.removesuffix("/v1")
        theirs = [(await client.post(f"{root}/tokenize", json={"model": vllm_server.model, "prompt": t, "add_special_tokens": s})).json()["tokens"]
                  for t in texts for s in (True, False)]
    assert ours == theirs
