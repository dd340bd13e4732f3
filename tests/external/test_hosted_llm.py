"""Apps from the frameworks' docs, wrapped while accel hosts their model (`accel.host_llm`):
stock talks to the vLLM server (through the recording proxy); the wrapped app's requests to
the same base URL are answered in this process by vLLM's own OpenAI layer. Same outputs, same
request bodies, and none of the wrapped app's generation requests reaches the server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import accel
from accel.engines.llm import hosted as hosted_module
from accel.hosting import unhost_llm
from accel.testing.proxy import RecordedRequest

from .apps import lc_rag_tutorial, li_starter
from .fidelity import compare_langchain, compare_llamaindex

pytestmark = [pytest.mark.engines, pytest.mark.slow]

HOSTED = "hosted:"


def _recording(app: Any, recorder: Any) -> Any:
    """An ASGI middleware that records request bodies as the proxy does, paths marked."""

    async def recorded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        message = await receive()
        body = message.get("body", b"")
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        recorder.add(RecordedRequest(scope["method"], HOSTED + scope["path"], payload))
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return message
            return await receive()

        await app(scope, replay, send)

    return recorded


@pytest.fixture(scope="module")
def hosted(base_url: str, tiny_model: Any, model_name: str, llm_proxy: Any) -> Iterator[Any]:
    """accel hosts the tiny model behind the proxy's base URL for this module's apps."""
    accel.shutdown()  # apps bound earlier in this process keep nothing of the server engine
    patch = pytest.MonkeyPatch()
    build = hosted_module.HostedServerEngine._build_app

    async def build_recorded(self: Any) -> Any:
        return _recording(await build(self), llm_proxy.recorder)

    patch.setattr(hosted_module.HostedServerEngine, "_build_app", build_recorded)
    # eager: starts about 8 s sooner than the server's graph capture, with the same kernels and tokens
    accel.host_llm(base_url, str(tiny_model), served_model_name=model_name, extra_args=["--enforce-eager"])
    try:
        yield llm_proxy
    finally:
        unhost_llm(base_url)
        accel.shutdown()  # stops the hosted engine and its engine core process
        patch.undo()


def _split(proxy: Any) -> Any:
    """A proxy stand-in whose recorder separates the hosted requests from the server's."""

    class Split:
        def __init__(self) -> None:
            self.hosted: list[RecordedRequest] = []
            self.served: list[RecordedRequest] = []

        def take(self) -> list[RecordedRequest]:
            taken = proxy.recorder.take()
            self.hosted += [r for r in taken if r.path.startswith(HOSTED)]
            self.served += [r for r in taken if not r.path.startswith(HOSTED)]
            return taken

    split = Split()

    class View:
        recorder = split

    return View(), split


def _generations(requests: list[RecordedRequest]) -> int:
    """Generation requests an app built (not accel's token-id warm-ups or priority probe)."""

    def token_ids(prompt: Any) -> bool:
        return isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], int)

    return sum(1 for r in requests if r.path.endswith("/completions") and r.body and not token_ids(r.body.get("prompt")))


def test_langchain_rag_tutorial_on_the_hosted_model(hosted, pydoc_files, pg_dsn, minilm_path, base_url,
                                                    model_name, questions) -> None:
    store = lc_rag_tutorial.index(pydoc_files, pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1),
                                  f"hosted_{uuid.uuid4().hex[:8]}", minilm_path)
    chain = lc_rag_tutorial.build(store, lc_rag_tutorial.chat_model(base_url, model_name))
    fast = accel.wrap(chain)
    view, split = _split(hosted)
    compare_langchain(chain, fast, questions, view)
    split.take()
    # invoke, batch and the traced run: stock's generations went to the server, the wrapped
    # app's (as many) stayed in process
    assert _generations(split.served) == _generations(split.hosted) == 2 * len(questions) + 1


async def test_llamaindex_starter_on_the_hosted_model(hosted, llama_settings, base_url, model_name, minilm_path,
                                                      pydoc_dir, questions) -> None:
    li_starter.configure(base_url, model_name, minilm_path)
    _, query_engine, _ = li_starter.build(str(pydoc_dir))
    fast = accel.wrap(query_engine)
    view, split = _split(hosted)
    await compare_llamaindex(query_engine, fast, questions, view)
    split.take()
    assert _generations(split.served) == _generations(split.hosted) > 0
