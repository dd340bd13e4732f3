"""langchain-community `HuggingFaceCrossEncoder.score` through the shared reranker.

Stock calls `CrossEncoder.predict(pairs)` with its defaults and returns the numpy array; the
engine loads the same model the same way and calls `predict` the same way (many programs'
pairs per call), and the scores come back as the same float32 array. Two-label models (stock
returns a `map` of the second column) and non-CPU model options stay stock.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.common import bindings
from accel.adapters.common.floor import Plugin, register, routed
from accel.types import EngineCall

COMPONENT = "HuggingFaceCrossEncoder"
_CPU_ONLY = ({}, {"device": "cpu"})


def _score(encoder: Any, text_pairs: Any) -> EngineCall | str:
    if encoder.model_kwargs not in _CPU_ONLY:
        return f"model_kwargs {sorted(encoder.model_kwargs)}"
    if getattr(encoder.client, "num_labels", 1) != 1:
        return "a multi-label cross-encoder"
    pairs = [(query, passage) for query, passage in text_pairs]
    if not all(isinstance(q, str) and isinstance(p, str) for q, p in pairs):
        return "pairs that are not (str, str)"
    return EngineCall(bindings.reranker(str(encoder.model_name)), pairs, COMPONENT, shape=_as_array)


def _as_array(scores: list[float]) -> Any:
    import numpy

    return numpy.asarray(scores, dtype=numpy.float32)


register(Plugin(
    "langchain:" + COMPONENT,
    "langchain_community.cross_encoders.huggingface",
    "HuggingFaceCrossEncoder",
    {"score": routed(COMPONENT, _score)},
))
