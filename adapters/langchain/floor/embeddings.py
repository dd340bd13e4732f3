"""`HuggingFaceEmbeddings` through the shared embedder.

Stock `_embed(texts, encode_kwargs)` replaces newlines by spaces, calls the model's `encode`
with the kwargs and returns `.tolist()`; the engine encodes the same texts with the same
options (normalisation, prompt) and returns the same lists of floats. Anything else (multi-process
pools, non-CPU model options, other encode options) stays stock.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.common import bindings
from accel.adapters.common.floor import Plugin, arouted, register, routed
from accel.types import EngineCall

COMPONENT = "HuggingFaceEmbeddings"
_OPTIONS = frozenset({"normalize_embeddings", "batch_size", "prompt"})
_CPU_ONLY = ({}, {"device": "cpu"})


def _plan(model: Any, texts: list[str], encode_kwargs: dict[str, Any]) -> EngineCall | str:
    from accel.engines.embeddings import EmbedRequest

    if model.multi_process:
        return "multi_process encoding"
    if model.model_kwargs not in _CPU_ONLY:
        return f"model_kwargs {sorted(model.model_kwargs)}"
    extra = set(encode_kwargs) - _OPTIONS
    if extra:
        return f"encode options {sorted(extra)}"
    normalize = bool(encode_kwargs.get("normalize_embeddings", False))
    prompt = encode_kwargs.get("prompt")
    requests = [EmbedRequest(text.replace("\n", " "), normalize=normalize, prompt=prompt) for text in texts]
    return EngineCall(bindings.embedder(str(model.model_name)), requests, COMPONENT)


def _query_options(model: Any) -> dict[str, Any]:
    return model.query_encode_kwargs if len(model.query_encode_kwargs) > 0 else model.encode_kwargs


def _embed(model: Any, texts: list[str], encode_kwargs: dict[str, Any]) -> EngineCall | str:
    return _plan(model, texts, encode_kwargs)


def _aembed_documents(model: Any, texts: list[str]) -> EngineCall | str:
    return _plan(model, texts, model.encode_kwargs)


def _aembed_query(model: Any, text: str) -> EngineCall | str:
    call = _plan(model, [text], _query_options(model))
    if isinstance(call, str):
        return call
    return EngineCall(call.engine, call.requests, COMPONENT, shape=lambda vectors: vectors[0])


register(Plugin(
    "langchain:" + COMPONENT,
    "langchain_huggingface.embeddings.huggingface",
    "HuggingFaceEmbeddings",
    {
        "_embed": routed(COMPONENT, _embed),
        "aembed_documents": arouted(COMPONENT, _aembed_documents),
        "aembed_query": arouted(COMPONENT, _aembed_query),
    },
))
