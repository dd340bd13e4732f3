"""Keyword search: a pluggable `SearchBackend` behind `SearchEngine`, and local Okapi BM25.

Teola's search primitive is a web search API; offline, a BM25 index over a local corpus plays
that part with the same shape (a batch of text queries in, ranked passages out), and a real
search service plugs in as another backend. BM25 scores a whole batch with one sparse
matrix product, in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from scipy import sparse

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
    """Okapi BM25 over fixed passages, as a (terms x passages) sparse matrix of term weights.

    score(q, d) = sum over query tokens t of idf(t) * tf(t,d) * (k1 + 1) /
                  (tf(t,d) + k1 * (1 - b + b * |d| / avgdl)),
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))  (Lucene's non-negative form).
    A token repeated in the query counts once per occurrence. Ties rank the earlier passage first.
    """

    def __init__(self, passages: Sequence[Passage], *, k1: float = 1.5, b: float = 0.75) -> None:
        if not passages:
            raise InvalidRequest(ENGINE, "BM25 needs at least one passage", "pass a non-empty corpus")
        self.passages = list(passages)
        self.k1, self.b = k1, b
        self.vocabulary: dict[str, int] = {}
        rows, cols, counts = [], [], []
        lengths = np.zeros(len(self.passages), dtype=np.float64)
        for row, passage in enumerate(self.passages):
            tokens = tokenize(passage.text)
            lengths[row] = len(tokens)
            for term, count in _counts(tokens, self.vocabulary, grow=True).items():
                rows.append(row)
                cols.append(term)
                counts.append(count)
        shape = (len(self.passages), len(self.vocabulary))
        tf = sparse.csr_matrix((np.asarray(counts, dtype=np.float64), (rows, cols)), shape=shape)
        df = np.bincount(tf.indices, minlength=shape[1]).astype(np.float64)
        n = float(len(self.passages))
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5))
        average = lengths.mean() or 1.0
        norm = k1 * (1.0 - b + b * lengths / average)
        row_of_entry = np.repeat(np.arange(shape[0]), np.diff(tf.indptr))
        weights = self.idf[tf.indices] * tf.data * (k1 + 1.0) / (tf.data + norm[row_of_entry])
        self._weights_t = sparse.csr_matrix((weights, tf.indices, tf.indptr), shape=shape).T.tocsr()

    def query_matrix(self, texts: Sequence[str]) -> sparse.csr_matrix:
        rows, cols, counts = [], [], []
        for row, text in enumerate(texts):
            for term, count in _counts(tokenize(text), self.vocabulary, grow=False).items():
                rows.append(row)
                cols.append(term)
                counts.append(count)
        return sparse.csr_matrix(
            (np.asarray(counts, dtype=np.float64), (rows, cols)), shape=(len(texts), len(self.vocabulary))
        )

    def top_k(self, texts: Sequence[str], ks: Sequence[int]) -> list[list[tuple[int, float]]]:
        """(passage index, score) of the best `k` passages with a positive score, per query."""
        scores = (self.query_matrix(texts) @ self._weights_t).tocsr()
        ranked = []
        for row, k in enumerate(ks):
            start, end = scores.indptr[row], scores.indptr[row + 1]
            index, value = scores.indices[start:end], scores.data[start:end]
            keep = value > 0
            index, value = index[keep], value[keep]
            order = np.lexsort((index, -value))[:k]
            ranked.append([(int(index[i]), float(value[i])) for i in order])
        return ranked


def _counts(tokens: list[str], vocabulary: dict[str, int], *, grow: bool) -> dict[int, int]:
    counts: dict[int, int] = {}
    for token in tokens:
        term = vocabulary.get(token)
        if term is None:
            if not grow:
                continue
            term = vocabulary[token] = len(vocabulary)
        counts[term] = counts.get(term, 0) + 1
    return counts


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
