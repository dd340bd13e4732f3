"""The offline models the suite runs where a model's cost is not what a test measures."""

from __future__ import annotations

import functools

from accel.engines.offline.reranker import build_reranker

SUITE_RERANKER_LAYERS = 2


@functools.cache
def suite_reranker() -> str:
    """The two-layer offline cross-encoder (the ms-marco-MiniLM-L-2-v2 shape), built once in the
    default cache: a pair costs about 2.6x less than the six-layer one `accel up` and the
    benchmarks serve, and stock and accel load the same model, so fidelity checks are unchanged."""
    return str(build_reranker(layers=SUITE_RERANKER_LAYERS))
