"""Rerank ahead on fake engines (named so: known latencies, deterministic scores), timed on a
virtual clock: each search's (question, chunk) pairs are scored as the search returns, each
pair once, and the rerank after the fusion asks only for what the sheet lacks; an early call
the engine fails costs the query nothing but the time, and is counted."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from accel.adapters.common.rerank_ahead import RerankAheadOp, ScoreSheet, merged, missing
from accel.engines.errors import EngineUnavailable
from accel.ir import CallOp, GatherOp, GraphBuilder, ItemsOp, Kind, Schedule, Streams, Template
from accel.runtime import graph_scheduler
from accel.runtime.runtime import Runtime
from accel.session import Session
from accel.testing.fakes import FakeEngine, FakeLLMEngine

from .test_graph_scheduler import WordsDecode

CHUNKS = {"alpha": ["a1", "shared"], "beta": ["b1", "shared"], "gamma": ["a1", "g1"]}
"""What each decoded query's search returns: chunks overlap across the searches."""


def score(pair: tuple[str, str]) -> float:
    return float(sum(map(ord, pair[0] + pair[1])) % 97)


def test_sheet_hands_out_each_pair_once_and_merges_in_order() -> None:
    sheet = ScoreSheet()
    assert sheet.claim([("q", "a"), ("q", "b"), ("q", "a")]) == [("q", "a"), ("q", "b")]
    assert sheet.claim([("q", "b"), ("q", "c")]) == [("q", "c")]
    sheet.fill([("q", "a"), ("q", "c")], [1.0, 3.0])  # b claimed but never filled (a failed call)
    pairs = [("q", "c"), ("q", "b"), ("q", "a")]
    assert missing(sheet, pairs) == [("q", "b")]
    assert merged(sheet, pairs, [2.0]) == [3.0, 2.0, 1.0]
    with pytest.raises(ValueError, match="more scores"):
        merged(sheet, pairs, [2.0, 9.0])


def _template() -> Template:
    """Decode -> (mapped) Search -> (mapped) RerankAhead; fuse -> ask -> Rerank -> scores."""
    b = GraphBuilder()
    q = b.input("q")
    words = b.add(Kind.PARTIAL_DECODE, "expand", engine="llm", inputs={"x": q}, schedule=Schedule(streams=Streams.DECODE),
                  op=WordsDecode())
    hits = b.add(Kind.SEARCH, "search", engine="search", inputs={"items": words},
                 schedule=Schedule(streams=Streams.MAPPED, map_port="items"), op=ItemsOp("items"))
    sheet = b.add(Kind.CALL, "sheet", inputs={"q": q}, op=CallOp(lambda q: ScoreSheet(), blocking=False))
    ahead = b.add(Kind.RERANK, "ahead", engine="rerank", inputs={"hits": hits, "query": q, "sheet": sheet},
                  attrs={"batch_port": "hits"}, schedule=Schedule(map_port="hits"), op=RerankAheadOp(list))
    flat = b.add(Kind.AGGREGATE, "fuse", inputs={"items": hits}, op=GatherOp("flatten"))
    pairs = b.add(Kind.CALL, "pairs", inputs={"q": q, "hits": flat},
                  op=CallOp(lambda q, hits: [(q, c) for c in dict.fromkeys(c for h in hits for c in h)], blocking=False))
    asked = b.add(Kind.CALL, "ask", inputs={"pairs": pairs, "sheet": sheet, "ahead": ahead},
                  op=CallOp(lambda pairs, sheet, ahead: missing(sheet, pairs), blocking=False))
    scores = b.add(Kind.RERANK, "rerank", engine="rerank", inputs={"pairs": asked}, op=ItemsOp("pairs"))
    b.output(b.add(Kind.CALL, "scores", inputs={"pairs": pairs, "sheet": sheet, "asked": scores},
                   op=CallOp(lambda pairs, sheet, asked: list(zip(pairs, merged(sheet, pairs, asked))), blocking=False)))
    return Template.from_graph(b.graph)


class FailingFirst(FakeEngine):
    """A fake rerank engine whose first call fails as a dead server's would."""

    async def run(self, batch):
        if not self.batches:
            self.batches.append(list(batch))
            raise EngineUnavailable(self.name, "connection refused", "start it")
        return await super().run(batch)


def _run(virtual, rerank: FakeEngine):
    template = _template()

    async def main():
        llm = FakeLLMEngine(token_latency=1.0, reply=lambda r: "alpha beta gamma")
        search = FakeEngine("search", latency=0.1, compute=lambda word: CHUNKS[word[0] if isinstance(word, list) else word])
        async with Runtime({"llm": llm, "search": search, "rerank": rerank}) as rt:
            out = await rt.run(template, {"q": "why"}, query_id="q1")
            return out, asyncio.get_running_loop().time()

    return virtual(main())


def test_pairs_are_scored_as_each_search_returns_once_each(virtual) -> None:
    stamps: list[float] = []

    def scored(pair):
        stamps.append(asyncio.get_running_loop().time())
        return score(pair)

    rerank = FakeEngine("rerank", latency=0.05, compute=scored)
    out, _ = _run(virtual, rerank)
    every = [("why", c) for c in ("a1", "shared", "b1", "g1")]
    assert out == [(pair, score(pair)) for pair in every]  # stock's scores, in the fused order
    sent = Counter(pair for batch in rerank.batches for pair in batch)
    assert sent == Counter(every)  # each pair once: none twice, none in vain, none left for the rerank
    # the first search's pairs were scored while the decode still had words to go (a word a
    # second: "gamma", the last, arrives at 3 s)
    assert min(stamps) < 3.0 and len(rerank.batches) >= 2


def test_a_failed_early_call_is_asked_again_after_the_fusion(virtual) -> None:
    before = sum(graph_scheduler.lost_speculations.values())
    rerank = FailingFirst("rerank", latency=0.05, compute=score)
    out, _ = _run(virtual, rerank)
    every = [("why", c) for c in ("a1", "shared", "b1", "g1")]
    assert out == [(pair, score(pair)) for pair in every]
    failed, *rest = rerank.batches
    assert failed == [("why", "a1"), ("why", "shared")]
    assert set(failed) <= set(rest[-1])  # the rerank after the fusion asked for what the failed call claimed
    assert sum(graph_scheduler.lost_speculations.values()) == before + 1
    [line] = Session.speculation_lines()  # what explain() shows
    assert "speculative engine calls that failed" in line and "ahead" in line
