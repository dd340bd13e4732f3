"""Stock app vs `accel.wrap(app)` on the same questions: outputs and engine requests.

The requests are compared at boundaries both runs share: the LLM request bodies through the
recording proxy (transport fields dropped; accel's prefix-cache warm-ups, token-id prompts
that stock never sends, counted apart), texts embedded (`SentenceTransformer.encode`), pairs
scored (`CrossEncoder.predict`) and vector searches (langchain-postgres' own search and accel's
`PgVectorEngine`), via `accel.testing.recording`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from accel.testing.recording import record_requests

_TRANSPORT = ("stream", "stream_options", "priority", "request_id")


@dataclass
class Run:
    outputs: list[Any]
    llm: list[str]
    warmups: int
    embedded: list[Any]
    searched: list[Any]
    scored: list[Any]
    streamed: list[str] = field(default_factory=list)


def llm_bodies(proxy: Any) -> tuple[list[str], int]:
    """Generation request bodies (transport fields and nulls dropped; one per prompt), sorted,
    and the number of prefix-cache warm-ups."""
    bodies, warmups, _ = llm_exchanges(proxy)
    return bodies, warmups


def llm_exchanges(proxy: Any) -> tuple[list[str], int, list[str]]:
    """`llm_bodies`, and the text of every server-sent event of the streamed answers. vLLM puts
    several tokens in one event when its client lags, stock's or ours, so two runs of one stream
    may split differently: a run's chunks are compared with its own server's events."""
    bodies, warmups, streamed = [], 0, []
    for request in proxy.recorder.take():
        if request.method != "POST" or not request.path.endswith(("/chat/completions", "/completions")):
            continue
        body = {k: v for k, v in (request.body or {}).items() if k not in _TRANSPORT and v is not None}
        prompt = body.get("prompt")
        if prompt == [0] and body.get("max_tokens") == 1 and "priority" in (request.body or {}):
            continue  # the engine's one probe for priority support at start (openai_client.py), no warm-up
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            warmups += 1
            continue
        if isinstance(prompt, list):
            # the OpenAI completions client sends its prompts as one list (`batch` -> one request
            # with n prompts, generated independently by the server); accel sends one request
            # per prompt so that they batch with other queries'. Compare per prompt.
            bodies += [json.dumps({**body, "prompt": p}, sort_keys=True) for p in prompt]
            continue
        bodies.append(json.dumps(body, sort_keys=True))
        if (request.body or {}).get("stream"):
            streamed += request.event_texts()
    return sorted(bodies), warmups, streamed



def record(call: Callable[[], list[Any]], proxy: Any) -> Run:
    """Run `call` and collect what it sent to the engines."""
    proxy.recorder.take()
    with record_requests() as log:
        outputs = call()
    llm, warmups, streamed = llm_exchanges(proxy)
    searched = sorted(log.searched, key=lambda e: repr((e[0], e[1], e[2], [round(v, 2) for v in e[3]])))
    return Run(outputs, llm, warmups, sorted(log.embedded), searched, sorted(log.scored), streamed)


def _first_difference(mine: list[str], theirs: list[str]) -> str:
    import difflib

    if len(mine) != len(theirs):
        return f"{len(mine)} requests vs stock's {len(theirs)}"
    for a, b in zip(mine, theirs, strict=True):
        if a != b:
            return "\n".join(difflib.unified_diff(b.split(", "), a.split(", "), "stock", "wrapped", lineterm="", n=1))
    return ""


def _distinct(run: Run) -> Run:
    """The run with each identical request once (and searches rounded, so that float noise
    does not keep two equal searches apart)."""
    searched = list({repr((e[0], e[1], e[2], tuple(round(v, 3) for v in e[3]))): e for e in run.searched}.values())
    return Run(run.outputs, sorted(set(run.llm)), run.warmups, sorted(set(run.embedded)), searched, sorted(set(run.scored)))


def assert_same_requests(stock: Run, fast: Run, *, distinct: bool = False) -> None:
    """The same requests; with `distinct`, the same distinct requests (a batch call computes
    identical deterministic requests once: `accel.runtime.sharing`)."""
    if distinct:
        stock, fast = _distinct(stock), _distinct(fast)
    assert fast.llm == stock.llm, _first_difference(fast.llm, stock.llm)
    assert fast.embedded == stock.embedded, (fast.embedded, stock.embedded)
    assert len(fast.searched) == len(stock.searched), (fast.searched, stock.searched)
    for mine, theirs in zip(fast.searched, stock.searched, strict=True):
        assert mine[:3] == theirs[:3]
        # batched encoding pads differently: vectors agree to float noise, not bit for bit
        assert max(abs(a - b) for a, b in zip(mine[3], theirs[3], strict=True)) < 1e-4
    assert fast.scored == stock.scored


# ---- LangChain ---------------------------------------------------------------------------------


def langchain_run(chain: Any, inputs: list[Any], proxy: Any, mode: str) -> Run:
    """`invoke` one input at a time, or `batch` (concurrent: LangChain runs the inputs in a
    thread pool; accel batches them on its shared engines)."""
    if mode == "invoke":
        return record(lambda: [chain.invoke(x) for x in inputs], proxy)
    if mode == "batch":
        return record(lambda: chain.batch(inputs), proxy)
    raise ValueError(mode)


def compare_langchain(chain: Any, fast: Any, inputs: list[Any], proxy: Any, *, output: Callable[[Any], Any] = lambda o: o) -> list[Run]:
    """Stock and wrapped, one `invoke` at a time and with `batch`: the same outputs and the
    same engine requests both ways, and the same callback run tree (what a tracer shows) for
    the first input. Returns the wrapped runs."""
    runs = []
    for mode in ("invoke", "batch"):
        stock = langchain_run(chain, inputs, proxy, mode)
        ours = langchain_run(fast, inputs, proxy, mode)
        assert [output(o) for o in ours.outputs] == [output(o) for o in stock.outputs], (mode, ours.outputs, stock.outputs)
        assert_same_requests(stock, ours, distinct=mode == "batch")
        runs.append(ours)
    assert_same_trace(chain, fast, inputs[0])
    return runs


def assert_same_trace(chain: Any, fast: Any, x: Any) -> None:
    from accel.testing.runtrees import Recorder, difference, outline, trees

    stock_runs, fast_runs = Recorder(), Recorder()
    chain.invoke(x, config={"callbacks": [stock_runs]})
    fast.invoke(x, config={"callbacks": [fast_runs]})
    fast_trees, stock_trees = trees(fast_runs), trees(stock_runs)
    assert fast_trees == stock_trees, (difference(fast_trees, stock_trees), [outline(t) for t in fast_trees], [outline(t) for t in stock_trees])


# ---- LlamaIndex --------------------------------------------------------------------------------


def assert_same_response(stock: Any, fast: Any) -> None:
    assert type(fast) is type(stock)
    assert fast.response == stock.response, (fast.response, stock.response)
    assert [n.node.node_id for n in fast.source_nodes] == [n.node.node_id for n in stock.source_nodes]
    assert [n.node.get_content() for n in fast.source_nodes] == [n.node.get_content() for n in stock.source_nodes]
    assert [n.score for n in fast.source_nodes] == pytest.approx([n.score for n in stock.source_nodes], abs=1e-5)
    assert fast.metadata == stock.metadata


async def llamaindex_run(engine: Any, questions: list[str], proxy: Any, mode: str) -> Run:
    """`query` one question at a time (in a worker thread, as a sync caller would), `aquery`
    one at a time, or all of them at once through `asyncio.gather` of `aquery` on the test's
    event loop."""
    proxy.recorder.take()
    with record_requests() as log:
        if mode == "query":
            outputs = [await asyncio.to_thread(engine.query, q) for q in questions]
        elif mode == "aquery":
            outputs = [await engine.aquery(q) for q in questions]
        elif mode == "gather":
            outputs = list(await asyncio.gather(*(engine.aquery(q) for q in questions)))
        else:
            raise ValueError(mode)
    llm, warmups = llm_bodies(proxy)
    return Run(outputs, llm, warmups, sorted(log.embedded), [], sorted(log.scored))


async def compare_llamaindex(engine: Any, fast: Any, questions: list[str], proxy: Any,
                             modes: tuple[str, ...] = ("query", "gather")) -> list[Run]:
    """Stock and wrapped, sequentially and concurrently: the same responses (text, source
    nodes, scores) and the same engine requests. Returns the wrapped runs."""
    runs = []
    for mode in modes:
        stock = await llamaindex_run(engine, questions, proxy, mode)
        ours = await llamaindex_run(fast, questions, proxy, mode)
        assert len(ours.outputs) == len(stock.outputs) == len(questions)
        for s, o in zip(stock.outputs, ours.outputs, strict=True):
            assert_same_response(s, o)
        assert stock.llm, "the stock app sent no generation request"
        assert_same_requests(stock, ours)
        runs.append(ours)
    return runs
