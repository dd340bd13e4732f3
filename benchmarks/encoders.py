"""The run's embedder and reranker as the bound's probes call them: the in-process models the
apps load, or the servers they call (`accel up --encoders server`, engine twins).

A server probe sends one request per step, as a batching engine would: `/v1/embeddings` with
every text, and `/score` with the pairs side by side (`text_1[i]` against `text_2[i]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import httpx

from accel.engines.keepalive import client_limits

TIMEOUT_S = 120.0


class Encoders(Protocol):
    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    def rerank(self, pairs: Sequence[tuple[str, str]]) -> list[float]: ...


class InProcessEncoders:
    """sentence-transformers on the CPU, loaded once."""

    def __init__(self, embed_model: str | None, rerank_model: str | None) -> None:
        from sentence_transformers import CrossEncoder, SentenceTransformer

        self._embedder = SentenceTransformer(embed_model, device="cpu") if embed_model else None
        self._reranker = CrossEncoder(rerank_model, device="cpu") if rerank_model else None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        assert self._embedder is not None
        return self._embedder.encode(list(texts)).tolist()

    def rerank(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        assert self._reranker is not None
        return [float(s) for s in self._reranker.predict(list(pairs))]


class ServerEncoders:
    """The embedding and rerank servers over HTTP, one kept-alive connection each."""

    def __init__(self, embed: tuple[str, str] | None, rerank: tuple[str, str] | None) -> None:
        self._embed, self._rerank = embed, rerank
        self._http = httpx.Client(timeout=TIMEOUT_S, limits=client_limits())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        assert self._embed is not None
        base_url, model = self._embed
        answer = self._http.post(f"{base_url.rstrip('/')}/embeddings", json={"model": model, "input": list(texts)})
        return [item["embedding"] for item in answer.raise_for_status().json()["data"]]

    def rerank(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        assert self._rerank is not None
        base_url, model = self._rerank
        body = {"model": model, "text_1": [q for q, _ in pairs], "text_2": [d for _, d in pairs]}
        answer = self._http.post(f"{base_url.rstrip('/').removesuffix('/v1')}/score", json=body)
        return [item["score"] for item in sorted(answer.raise_for_status().json()["data"], key=lambda d: d["index"])]


def encoders_for(stack: Any, *, embed: bool, rerank: bool) -> Encoders:
    """The encoders the run's apps use; `embed` / `rerank`: whether the example needs each."""
    embed_url, rerank_url = getattr(stack, "embed_base_url", None), getattr(stack, "rerank_base_url", None)
    if embed_url or rerank_url:
        return ServerEncoders((embed_url, stack.embed_model_name) if embed and embed_url else None,
                              (rerank_url, stack.rerank_model_name) if rerank and rerank_url else None)
    return InProcessEncoders(stack.embed_model if embed else None, stack.rerank_model if rerank else None)
