"""Deterministic content: a twin's tokens, vectors and scores depend only on the request.

Stock and accel must get equal answers from a twin when they send equal requests, whatever the
batching or timing, so nothing here reads a clock, a counter or a shared random state.
"""

from __future__ import annotations

import functools
import hashlib
import math
import operator
import random
import re
from collections.abc import Sequence
from typing import Any

_WORD = re.compile(r"[a-z0-9]+")


def _seed(*parts: Any) -> int:
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


class OutputPlan:
    """The tokens one request will generate: drawn from a PRNG seeded with the prompt ids, the
    sampling parameters that change sampling, and `seed`; EOS at a position drawn from
    `answer_tokens` (the profile's) unless `ignore_eos`, or never when that is None."""

    def __init__(self, prompt_ids: Sequence[int], sampling: dict[str, Any], vocab: Sequence[int], eos_id: int | None,
                 answer_tokens: tuple[int, int] | None = (8, 96)):
        keys = ("temperature", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty")
        self._rng = random.Random(_seed(tuple(prompt_ids), tuple((k, sampling.get(k)) for k in keys)))
        self._vocab = vocab
        ends = eos_id is not None and answer_tokens is not None and not sampling.get("ignore_eos", False)
        self.eos_id = eos_id if ends else None
        self.eos_at = self._rng.randint(*answer_tokens) if ends and answer_tokens else None

    def token(self, position: int) -> int:
        """The token at `position` (0-based, called in order)."""
        if self.eos_at is not None and position + 1 >= self.eos_at:
            return self.eos_id  # type: ignore[return-value]
        return self._vocab[self._rng.randrange(len(self._vocab))]


VECTORS_REMEMBERED = 1024
"""Texts whose vectors a twin keeps (about 12 KiB each): every query's rerank scores chunks of
the same corpus, and a vector costs a few thousand Python operations. Computed per pair, a
512-pair call took the twin 0.44 s of its own CPU where the H100 curve models 0.2 s, so the
twin lagged behind the hardware it models and took the cores the app's process runs on."""


def embedding(text: str, dimensions: int) -> list[float]:
    """A hashed bag of words projected to `dimensions` and normalised: texts that share words
    get close vectors, so a vector search over a twin's vectors ranks overlap first."""
    return list(_embedding(text, dimensions))


@functools.lru_cache(maxsize=VECTORS_REMEMBERED)
def _embedding(text: str, dimensions: int) -> tuple[float, ...]:
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        for slot, sign in _slots(word, dimensions):
            vector[slot] += sign
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        vector[_seed("empty", text) % dimensions] = 1.0
        return tuple(vector)
    return tuple(v / norm for v in vector)


@functools.lru_cache(maxsize=1 << 16)
def _slots(word: str, dimensions: int) -> tuple[tuple[int, float], ...]:
    """A word's 8 signed slots (remembered: a corpus repeats its words)."""
    rng = random.Random(_seed("w", word))
    return tuple((rng.randrange(dimensions), rng.choice((-1.0, 1.0))) for _ in range(8))


def score(query: str, passage: str, dimensions: int = 384) -> float:
    """A relevance score in (0, 1): the logistic of the scaled cosine of the two embeddings."""
    cosine = sum(map(operator.mul, _embedding(query, dimensions), _embedding(passage, dimensions)))
    return 1.0 / (1.0 + math.exp(-8.0 * (cosine - 0.25)))
