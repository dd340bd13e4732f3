"""Keyword search: a pluggable `SearchBackend` behind `SearchEngine`, and local Okapi BM25.

Teola's search primitive is a web search API; offline, a BM25 index over a local corpus plays
that part with the same shape (a batch of text queries in, ranked passages out), and a real
search service plugs in as another backend. BM25 is `bm25s`'s, run in a worker thread, never
on the event loop.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from accel.engines.base import Engine, Health, SearchHit, TextQuery
from accel.engines.errors import EmptyBatch, InvalidRequest

ENGINE = "search"
_TOKEN = re.compile(r"\w+")


class Passage(Protocol):
    """Anything with an id, a text and metadata (e.g. `accel.engines.offline.corpus.Document`)."""

    id: str
    text: str
    metadata: Mapping[str, Any]


@runtime_checkable
class SearchBackend(Protocol):
    """A search service: `prepare` loads or connects once, `search` ranks a batch of queries."""

    async def prepare(self) -> None: ...

    async def search(self, queries: Sequence[TextQuery]) -> list[list[SearchHit]]: ...


@dataclass(frozen=True)
class TextPassage:
    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; no stemming or stop words, so scores are easy to reproduce."""
    return _TOKEN.findall(text.lower())


def split_passages(documents: Sequence[Passage], max_words: int = 120) -> list[TextPassage]:
    """Cut documents into passages of at most about `max_words` words: paragraphs merged while
    they fit, longer paragraphs cut between lines. Ranking whole pydoc pages would be useless."""
    passages: list[TextPassage] = []
    for document in documents:
        chunks: list[str] = []
        current: list[str] = []
        words = 0
        for paragraph in _pieces(document.text, max_words):
            size = len(paragraph.split())
            if current and words + size > max_words:
                chunks.append("\n\n".join(current))
                current, words = [], 0
            current.append(paragraph)
            words += size
        if current:
            chunks.append("\n\n".join(current))
        for number, chunk in enumerate(chunks):
            metadata = {**document.metadata, "doc_id": document.id, "passage": number}
            passages.append(TextPassage(f"{document.id}#{number}", chunk, metadata))
    return passages


def _pieces(text: str, max_words: int) -> list[str]:
    """Paragraphs (split at blank lines), each longer one cut into runs of whole lines."""
    pieces: list[str] = []
    for paragraph in (p.strip() for p in re.split(r"\n\s*\n", text)):
        run: list[str] = []
        words = 0
        for line in paragraph.splitlines():
            size = len(line.split())
            if run and words + size > max_words:
                pieces.append("\n".join(run))
                run, words = [], 0
            run.append(line)
            words += size
        if words:
            pieces.append("\n".join(run).strip())
    return pieces


def default_passages() -> list[TextPassage]:
    """The offline default corpus: pydoc pages of standard-library modules, as passages."""
    from accel.engines.offline.corpus import stdlib_docs

    return split_passages(stdlib_docs())


class BM25Index:
    """Okapi BM25 over fixed passages, scored by `bm25s` (its Lucene variant, in float64):

    score(q, d) = sum over query tokens t of idf(t) * tf(t,d) /
                  (tf(t,d) + k1 * (1 - b + b * |d| / avgdl)),
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))  (Lucene's non-negative form).
    Tokens are ours (`tokenize`); a token repeated in the query counts once per occurrence.
    Only passages with a positive score are returned; ties rank the earlier passage first.
    """

    def __init__(self, passages: Sequence[Passage], *, k1: float = 1.5, b: float = 0.75) -> None:
        import bm25s

        if not passages:
            raise InvalidRequest(ENGINE, "BM25 needs at least one passage", "pass a non-empty corpus")
        self.passages = list(passages)
        self.k1, self.b = k1, b
        self._model = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
        self._model.index([tokenize(p.text) for p in self.passages], show_progress=False)
        self.vocabulary: Mapping[str, int] = self._model.vocab_dict

    def scores(self, text: str) -> np.ndarray:
        """The BM25 score of every passage for the query `text` (0 where nothing matches)."""
        tokens = [t for t in tokenize(text) if t in self.vocabulary]
        if not tokens:
            return np.zeros(len(self.passages))
        return np.asarray(self._model.get_scores(tokens), dtype=np.float64)

    def top_k(self, texts: Sequence[str], ks: Sequence[int]) -> list[list[tuple[int, float]]]:
        """(passage index, score) of the best `k` passages with a positive score, per query."""
        ranked = []
        for text, k in zip(texts, ks, strict=True):
            scores = self.scores(text)
            (index,) = np.nonzero(scores > 0)
            value = scores[index]
            order = np.lexsort((index, -value))[:k]
            ranked.append([(int(index[i]), float(value[i])) for i in order])
        return ranked


class BM25Backend:
    """Local BM25 (k1=1.5, b=0.75). `documents=None` means the stdlib pydoc corpus, split
    into passages; given documents are indexed as they are (one passage each)."""

    def __init__(self, documents: Sequence[Passage] | None = None, *, k1: float = 1.5, b: float = 0.75) -> None:
        self._documents = documents
        self._k1, self._b = k1, b
        self._index: BM25Index | None = None
        self._lock = asyncio.Lock()

    async def prepare(self) -> None:
        async with self._lock:
            if self._index is None:
                self._index = await asyncio.to_thread(self._build)

    def _build(self) -> BM25Index:
        passages = default_passages() if self._documents is None else self._documents
        return BM25Index(passages, k1=self._k1, b=self._b)

    @property
    def size(self) -> int:
        """Number of indexed passages (0 before `prepare`)."""
        return len(self._index.passages) if self._index else 0

    async def search(self, queries: Sequence[TextQuery]) -> list[list[SearchHit]]:
        await self.prepare()
        index = self._index
        assert index is not None
        ranked = await asyncio.to_thread(index.top_k, [q.query for q in queries], [q.k for q in queries])
        return [
            [SearchHit(index.passages[i].id, index.passages[i].text, score, dict(index.passages[i].metadata)) for i, score in hits]
            for hits in ranked
        ]


class SearchEngine(Engine[TextQuery, list[SearchHit]]):
    """The "search" engine: validates the batch and hands it whole to its backend.
    `SearchHit.score` is the backend's relevance score, higher is better (BM25 here)."""

    kind = "search"

    def __init__(self, backend: SearchBackend | None = None, *, name: str = "bm25") -> None:
        self.name = name
        self.backend: SearchBackend = backend if backend is not None else BM25Backend()

    async def start(self) -> None:
        await self.backend.prepare()

    async def run(self, batch: Sequence[TextQuery]) -> list[list[SearchHit]]:
        if not batch:
            raise EmptyBatch(ENGINE, "run() got an empty batch", "send at least one TextQuery")
        for position, query in enumerate(batch):
            if not isinstance(query.query, str):
                raise InvalidRequest(ENGINE, f"query {position} is {type(query.query).__name__}, not text", "send str queries")
            if not isinstance(query.k, int) or query.k < 1:
                raise InvalidRequest(ENGINE, f"query {position}: k={query.k!r}", "ask for k >= 1 results")
        results = await self.backend.search(batch)
        if len(results) != len(batch):
            raise InvalidRequest(ENGINE, f"backend returned {len(results)} results for {len(batch)} queries", "fix the search backend")
        return results

    async def health(self) -> Health:
        loop = asyncio.get_running_loop()
        began = loop.time()
        hits = await self.run([TextQuery("python module function", k=1)])
        detail = f"{type(self.backend).__name__}: {len(hits[0])} hit(s) for a probe query"
        return Health(self.name, True, detail, loop.time() - began)


__all__ = ["BM25Backend", "BM25Index", "Passage", "SearchBackend", "SearchEngine", "TextPassage", "split_passages", "tokenize"]
