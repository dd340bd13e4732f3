"""`HuggingFaceEmbedding` through the shared embedder.

Stock encodes with the model's own `encode(texts, batch_size=embed_batch_size,
prompt_name="query"|"text", normalize_embeddings=normalize)` and returns `.tolist()`; its async
methods run the sync ones in a worker thread. The engine loads the same model and encodes the
same texts with the same prompt and normalisation (`bindings.bind_embedding` names what it
does not reproduce: an embeddings cache, multi-process encoding, a changed sequence length),
and the vectors come back as the same lists of floats. Image inputs stay stock.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.common.floor import Plugin, arouted, register, routed
from accel.types import EngineCall
from accel.adapters.llamaindex.floor.spans import keep_span

COMPONENT = "HuggingFaceEmbedding"


def _plan(model: Any, texts: list[Any], kind: str) -> EngineCall | str:
    from accel.adapters.llamaindex.bindings import Unbound, bind_embedding

    binding = bind_embedding(model)
    if isinstance(binding, Unbound):
        return binding.reason
    if not all(isinstance(t, str) for t in texts):
        return "non-text inputs"
    request = binding.query_request if kind == "query" else binding.text_request
    return EngineCall(binding.engine, [request(t) for t in texts], COMPONENT)


def _one(call: EngineCall | str) -> EngineCall | str:
    if isinstance(call, str):
        return call
    return EngineCall(call.engine, call.requests, COMPONENT, shape=lambda vectors: vectors[0])


def _query(model: Any, query: str) -> EngineCall | str:
    return _one(_plan(model, [query], "query"))


def _text(model: Any, text: str) -> EngineCall | str:
    return _one(_plan(model, [text], "text"))


def _texts(model: Any, texts: list[str]) -> EngineCall | str:
    return _plan(model, list(texts), "text")


MODULE = "llama_index.embeddings.huggingface.base"
register(Plugin(
    "llamaindex:" + COMPONENT,
    MODULE,
    "HuggingFaceEmbedding",
    {
        "_get_query_embedding": keep_span(MODULE, routed(COMPONENT, _query)),
        "_get_text_embedding": keep_span(MODULE, routed(COMPONENT, _text)),
        "_get_text_embeddings": keep_span(MODULE, routed(COMPONENT, _texts)),
        "_aget_query_embedding": keep_span(MODULE, arouted(COMPONENT, _query)),
        "_aget_text_embedding": keep_span(MODULE, arouted(COMPONENT, _text)),
        "_aget_text_embeddings": keep_span(MODULE, arouted(COMPONENT, _texts)),
    },
))
