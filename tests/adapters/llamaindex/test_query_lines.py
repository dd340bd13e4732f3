"""QueryFusionRetriever's line parsing, fed incrementally, gives the stock queries however the
completion is cut into deltas (no engines needed)."""

from __future__ import annotations

import random

import pytest

from accel.adapters.llamaindex.query_lines import QueryLines, parse_queries

TEXTS = [
    "first query\nsecond query\nthird query",
    "```\nfenced one\n  fenced two  \n```",
    "``inline start\n\n\nmiddle ``ticks`` kept\nend``",
    "\n\n   \n",
    "only one line``",
    "a\n``\n`",
    "trailing newline\n",
    "` \nx\r\ny",
]


def stock_queries(text: str, limit: int) -> list[str]:
    """`QueryFusionRetriever._get_queries`' parsing of a completion."""
    queries = [q.strip() for q in text.strip("`").split("\n") if q.strip()]
    return queries[:limit]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("seed", range(5))
def test_streamed_lines_match_the_retrievers_parsing(text: str, seed: int) -> None:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(0, 6)))) if len(text) > 1 else []
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    lines = QueryLines()
    streamed = [item for delta in deltas for item in lines.feed(delta)] + lines.close()
    assert streamed == stock_queries(text, 100)
    assert parse_queries(text, 2) == stock_queries(text, 2)


async def test_op_streams_the_original_first_and_closes_after_the_last_kept_line() -> None:
    from accel.adapters.llamaindex.query_lines import QueryLinesOp
    from accel.engines.base import GenerationChunk, SamplingParams

    closed: list[bool] = []
    sent: list[str] = []

    async def deltas():
        try:
            for delta in ["alpha que", "ry\nbeta", " query\n", "gamma\n", "delta\n"]:
                sent.append(delta)
                yield GenerationChunk(delta=delta)
        finally:
            closed.append(True)

    op = QueryLinesOp(SamplingParams(max_tokens=32), limit=2, llm=None)
    items = [item async for item in op.streamed().stream({"query": "original", "prompt": "p"}, deltas())]
    assert items == [["original"], ["alpha query"], ["beta query"]]
    assert closed == [True] and sent[-1] == " query\n"  # the rest of the decode is not awaited
