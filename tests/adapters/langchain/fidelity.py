"""Run a stock chain and its wrapped twin on the same inputs; collect outputs and the requests
each sent to the engines (LLM bodies through the recording proxy, embeddings, searches and
rerank pairs at their shared boundaries)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from accel.testing.recording import record_requests

_TRANSPORT = ("stream", "stream_options", "priority", "request_id")


@dataclass
class Run:
    outputs: list[Any]
    llm: list[str]
    embedded: list[Any]
    searched: list[Any]
    scored: list[Any]
    warmups: int


def llm_bodies(proxy) -> tuple[list[str], int]:
    """Generation request bodies (transport fields and nulls dropped), sorted; and the number
    of prefix-cache warm-ups (token-id prompts), which stock never sends."""
    bodies, warmups, _ = llm_exchanges(proxy)
    return bodies, warmups


def llm_exchanges(proxy) -> tuple[list[str], int, list[str]]:
    """`llm_bodies`, plus the text of every server-sent event of the streamed answers, in the
    order the proxy relayed them: what a client's token callbacks must see. (vLLM puts several
    tokens in one event when its client lags, so two runs of one stream may differ in where
    the events split; a run's token events must match its own server's events.)"""
    bodies, warmups, deltas = [], 0, []
    for request in proxy.recorder.take():
        if request.method != "POST" or not request.path.endswith(("/chat/completions", "/completions")):
            continue
        body = {k: v for k, v in (request.body or {}).items() if k not in _TRANSPORT and v is not None}
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            warmups += 1
            continue
        if isinstance(prompt, list) and len(prompt) == 1:  # the OpenAI LLM client sends a batch of one
            body["prompt"] = prompt[0]
        bodies.append(json.dumps(body, sort_keys=True))
        if (request.body or {}).get("stream"):
            deltas += request.event_texts()
    return sorted(bodies), warmups, deltas



def run(chain: Any, inputs: list[Any], proxy, *, mode: str = "invoke") -> Run:
    proxy.recorder.take()
    with record_requests() as log:
        if mode == "invoke":
            outputs = [chain.invoke(x) for x in inputs]
        elif mode == "stream":
            outputs = [list(chain.stream(x)) for x in inputs]
        else:
            outputs = chain.batch(inputs)
    llm, warmups = llm_bodies(proxy)
    return Run(outputs, llm, sorted(log.embedded), sorted(log.searched, key=_search_key), sorted(log.scored), warmups)


def _search_key(entry: Any) -> str:
    collection, k, flt, vector = entry
    return repr((collection, k, flt, [round(v, 2) for v in vector]))


def assert_same(stock: Run, fast: Run, *, output=lambda value: value) -> None:
    assert [output(o) for o in fast.outputs] == [output(o) for o in stock.outputs], (fast.outputs, stock.outputs)
    assert fast.llm == stock.llm, (fast.llm, stock.llm)
    assert fast.embedded == stock.embedded, (fast.embedded, stock.embedded)
    assert len(fast.searched) == len(stock.searched)
    for mine, theirs in zip(fast.searched, stock.searched, strict=True):
        assert mine[:3] == theirs[:3]
        # batched encoding pads differently: vectors agree to float noise, not bit for bit
        assert max(abs(a - b) for a, b in zip(mine[3], theirs[3], strict=True)) < 1e-4
    assert fast.scored == stock.scored
