"""Reranking ahead: score a query's (question, chunk) pairs as each of its searches returns.

A fusion retriever followed by a cross-encoder rerank scores (question, chunk) for every chunk
the fusion keeps. When the fusion keeps every chunk its searches find, each pair is known the
moment its search returns: the original question's search ends long before the generated
queries are decoded, while the rerank engine idles, and stock scores them all only after the
last search (Teola's pipelining, applied at the rerank). The adapters lower one rerank-ahead
node per search (`RerankAheadOp`, an engine node that decode pipelining maps onto the search
stream); it scores the pairs that no earlier search of the same query claimed, into the
query's `ScoreSheet`. The reranker then asks the engine only for the pairs the sheet lacks:
the lowered rerank node reads the sheet directly, and the Cohere SDK's floor plug-in reads it
(`current()`) while the app's own postprocessor runs under `using(sheet)`.

Scores are per pair, so the ranking is stock's. A pair the sheet lacks (a failed early call,
a chunk whose text came out differently) is scored where stock scores it: the sheet is looked
up by the exact (question, text) pair, and answers a call only on the engine (server and model)
its scores came from, never trusted beyond that.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from accel.engines.catalogue import EngineSpec

Pair = tuple[str, str]

log = logging.getLogger("accel.adapters.common.rerank_ahead")
misses: Counter[str] = Counter()
"""Reranker calls made with a sheet in reach that it could not answer, by why: the call went
to its engine as stock sends it (pairs scored ahead there were spent in vain)."""


@dataclass
class ScoreSheet:
    """One query's early rerank scores. `claim` hands out each pair once (the searches of one
    query overlap, and a pair is worth scoring once); `fill` records what came back."""

    engine: tuple[str, Hashable] | None = None
    """The (kind, key) of the engine whose scores the sheet holds."""
    claimed: set[Pair] = field(default_factory=set)
    scores: dict[Pair, float] = field(default_factory=dict)

    @classmethod
    def on(cls, engine: EngineSpec) -> ScoreSheet:
        return cls((engine.kind, engine.key))

    def answers(self, engine: EngineSpec, pairs: Sequence[Pair]) -> bool:
        """Whether a call of these pairs on `engine` can be answered from the sheet; a call it
        cannot answer is logged and counted (`misses`)."""
        if (engine.kind, engine.key) != self.engine:
            why = "another engine"
        elif missing(self, pairs):
            why = "pairs missing from the sheet"
        else:
            return True
        misses[why] += 1
        log.info("rerank ahead: a call of %d pairs not answered from the score sheet (%s); sent to its engine",
                 len(pairs), why)
        return False

    def claim(self, pairs: Sequence[Pair]) -> list[Pair]:
        new = [pair for pair in dict.fromkeys(pairs) if pair not in self.claimed]
        self.claimed.update(new)
        return new

    def fill(self, pairs: Sequence[Pair], scores: Sequence[float]) -> None:
        self.scores.update(zip(pairs, scores, strict=True))

    def lookup(self, pairs: Sequence[Pair]) -> list[float | None]:
        return [self.scores.get(pair) for pair in pairs]


def new_sheet(engine: EngineSpec) -> Callable[..., ScoreSheet]:
    """A graph node's function making one query's sheet for scores from `engine`."""
    return lambda **_inputs: ScoreSheet.on(engine)


def missing(sheet: ScoreSheet, pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs the sheet has no score for, in order (what the reranker still asks for)."""
    return [pair for pair, score in zip(pairs, sheet.lookup(pairs)) if score is None]


def merged(sheet: ScoreSheet, pairs: Sequence[Pair], asked: Sequence[float]) -> list[float]:
    """Every pair's score, in `pairs`' order: the sheet's, else the next of `asked` (the
    engine's scores of `missing(sheet, pairs)`, in that order)."""
    rest = iter(asked)
    scores = [next(rest) if score is None else score for score in sheet.lookup(pairs)]
    if next(rest, None) is not None:
        raise ValueError("more scores than pairs missing from the sheet")
    return scores


_current: contextvars.ContextVar[ScoreSheet | None] = contextvars.ContextVar("accel_score_sheet", default=None)


@contextlib.contextmanager
def using(sheet: ScoreSheet | None) -> Iterator[None]:
    """Code in this block (a postprocessor's own call) may answer pairs from `sheet`."""
    token = _current.set(sheet)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> ScoreSheet | None:
    return _current.get()


@dataclass(frozen=True)
class RerankAheadOp:
    """A Rerank node over one search's results (`values["hits"]`: one hit list per query of
    the expansion, or a slice of them when mapped onto the search stream; with `single`, one
    hit list): it asks for the (question, text) pairs of the hits that `values["sheet"]` has
    not handed out yet and records their scores there. Work ahead of need (`speculative`): if
    the engine fails it, the query goes on and the reranker asks for those pairs itself. Its
    value is one None per hit list, or None with `single` (the scores live in the sheet)."""

    texts: Callable[[Any], list[str]]
    """A hit list -> the texts the reranker will score, as the framework builds them."""
    port: str = "hits"
    elementwise: bool = True
    speculative: bool = True
    single: bool = False

    def _hit_lists(self, values: dict[str, Any]) -> list[Any]:
        return [values[self.port]] if self.single else list(values[self.port])

    async def requests(self, values: dict[str, Any]) -> list[Pair]:
        query = values["query"]
        return values["sheet"].claim([(query, text) for hits in self._hit_lists(values) for text in self.texts(hits)])

    def settle(self, values: dict[str, Any], requests: list[Pair], results: list[float] | None) -> list[None] | None:
        if results is not None:
            values["sheet"].fill(requests, results)
        return None if self.single else [None] * len(values[self.port])
