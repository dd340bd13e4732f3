"""Local Okapi BM25 behind SearchEngine: ranking, batching, determinism, default corpus."""

from __future__ import annotations

import math
import time
from collections import Counter

import pytest

from accel.engines.base import SearchHit, TextQuery
from accel.engines.errors import EmptyBatch, InvalidRequest
from accel.engines.search import BM25Backend, SearchBackend, SearchEngine, TextPassage, split_passages, tokenize

CORPUS = [
    TextPassage("cats", "The cat sat on the mat. A cat likes a warm mat.", {"kind": "pets"}),
    TextPassage("dogs", "The dog chased the cat around the garden.", {"kind": "pets"}),
    TextPassage("stocks", "Stock markets fell as bond yields rose sharply.", {"kind": "finance"}),
    TextPassage("bonds", "Bond yields and bond prices move in opposite directions.", {"kind": "finance"}),
    TextPassage("garden", "Plant tomatoes in the garden after the last frost.", {"kind": "home"}),
    TextPassage("twin-a", "Quantum tunnelling explained simply.", {}),
    TextPassage("twin-b", "Quantum tunnelling explained simply.", {}),
]


def _reference_bm25(query: str, k1: float = 1.5, b: float = 0.75) -> dict[str, float]:
    """BM25 (Lucene's variant, as bm25s scores it) written out term by term."""
    docs = {p.id: tokenize(p.text) for p in CORPUS}
    average = sum(len(t) for t in docs.values()) / len(docs)
    scores = {}
    for doc_id, tokens in docs.items():
        tf = Counter(tokens)
        score = 0.0
        for term in tokenize(query):
            df = sum(term in t for t in docs.values())
            if tf[term]:
                idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
                score += idf * tf[term] / (tf[term] + k1 * (1 - b + b * len(tokens) / average))
        if score > 0:
            scores[doc_id] = score
    return scores


@pytest.fixture
async def small_engine() -> SearchEngine:
    engine = SearchEngine(BM25Backend(CORPUS))
    await engine.start()
    return engine


async def test_known_ranking(small_engine: SearchEngine) -> None:
    [cat] = await small_engine.run([TextQuery("cat mat", k=3)])
    assert [h.id for h in cat] == ["cats", "dogs"]  # only passages sharing a term are hits
    [bond] = await small_engine.run([TextQuery("bond yields", k=5)])
    assert [h.id for h in bond] == ["bonds", "stocks"]
    assert bond[0].metadata == {"kind": "finance"} and bond[0].text == CORPUS[3].text
    assert await small_engine.run([TextQuery("zebra", k=3)]) == [[]]


@pytest.mark.parametrize("query", ["cat mat", "bond yields rose", "the garden cat", "quantum"])
async def test_scores_match_the_formula(small_engine: SearchEngine, query: str) -> None:
    [hits] = await small_engine.run([TextQuery(query, k=10)])
    expected = _reference_bm25(query)
    assert {h.id: h.score for h in hits} == pytest.approx(expected, rel=1e-12)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_ties_rank_in_corpus_order(small_engine: SearchEngine) -> None:
    [hits] = await small_engine.run([TextQuery("quantum tunnelling", k=2)])
    assert [h.id for h in hits] == ["twin-a", "twin-b"] and hits[0].score == hits[1].score


async def test_batch_equals_one_by_one(small_engine: SearchEngine) -> None:
    queries = [TextQuery("cat", 2), TextQuery("bond market", 3), TextQuery("zebra", 1), TextQuery("garden frost tomatoes", 4)]
    batched = await small_engine.run(queries)
    assert batched == [(await small_engine.run([q]))[0] for q in queries]


async def test_bad_requests_are_typed(small_engine: SearchEngine) -> None:
    with pytest.raises(EmptyBatch):
        await small_engine.run([])
    with pytest.raises(InvalidRequest):
        await small_engine.run([TextQuery("cat", k=0)])
    with pytest.raises(InvalidRequest):
        await SearchEngine(BM25Backend([])).start()


def test_split_passages_keeps_every_word() -> None:
    text = "\n\n".join(" ".join(f"w{p}_{i}" for i in range(50)) for p in range(5)) + "\n" + "tail " * 300
    passages = split_passages([TextPassage("doc", text, {"source": "x"})], max_words=120)
    assert [p.id for p in passages] == [f"doc#{i}" for i in range(len(passages))]
    assert all(len(p.text.split()) <= 300 for p in passages)
    assert " ".join(p.text for p in passages).split() == text.split()
    assert passages[0].metadata == {"source": "x", "doc_id": "doc", "passage": 0}


async def test_default_corpus_loads_and_answers() -> None:
    engine = SearchEngine()
    await engine.start()
    backend = engine.backend
    assert isinstance(backend, SearchBackend) and isinstance(backend, BM25Backend) and backend.size > 100
    [hits] = await engine.run([TextQuery("parse command line options and arguments", k=5)])
    assert len(hits) == 5 and all(isinstance(h, SearchHit) for h in hits)
    assert any(h.metadata["module"] in ("argparse", "getopt") for h in hits)
    assert (await engine.health()).ok


async def test_batch_timing_report() -> None:
    """Reports (does not assert) N queries in one call against N calls on the default corpus."""
    engine = SearchEngine()
    await engine.start()
    words = ["json", "decode", "heap", "queue", "random", "seed", "calendar", "month", "zip", "file", "logging", "level"]
    queries = [TextQuery(f"{words[i % 12]} {words[(i * 5 + 1) % 12]}", k=5) for i in range(64)]
    began = time.perf_counter()
    batched = await engine.run(queries)
    one_call = time.perf_counter() - began
    began = time.perf_counter()
    singles = [(await engine.run([q]))[0] for q in queries]
    n_calls = time.perf_counter() - began
    assert batched == singles
    print(f"\nbm25 N=64 over {engine.backend.size} passages: one call {one_call * 1e3:.1f} ms, 64 calls {n_calls * 1e3:.1f} ms")
