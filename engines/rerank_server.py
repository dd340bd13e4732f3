"""A rerank server (vLLM's pooling runner for a cross-encoder) as an accel engine.

vLLM's `/score` scores `text_1[i]` against `text_2[i]` when both are lists of one length, so
(query, passage) pairs of many queries go to the server as one request. Its `/rerank` (the
Cohere / Jina shape: one query, many documents) scores the same pairs with the same model and
pooler; the scores are one pair's each, whichever request carried them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx

from accel.engines.base import Engine, Health
from accel.engines.errors import EmptyBatch, EngineUnavailable, InvalidRequest
from accel.engines.http_client import connect_timeout, engine_client

_REMEDY = "start the encoder servers with `accel up --encoders server`, or point ACCEL_RERANK_BASE_URL at a running server"
Pair = tuple[str, str]

MAX_PAIRS = 1024
"""Pairs one `/score` request carries at most (a batch with more is sent as several)."""


class RerankServerEngine(Engine[Pair, float]):
    """`POST {root}/score` with the batch's queries and passages as two equal-length lists."""

    kind = "rerank"

    def __init__(self, base_url: str, model: str, api_key: str = "EMPTY", *, max_pairs: int = MAX_PAIRS,
                 timeout_s: float = 600.0, connect_timeout_s: float | None = None, name: str | None = None) -> None:
        if max_pairs < 1:
            raise InvalidRequest("rerank-server", f"max_pairs={max_pairs}", "pass a positive count")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = name or f"rerank-server:{model}"
        self.max_pairs = max_pairs
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout(connect_timeout_s))
        self._client: httpx.AsyncClient | None = None
        self.posts = 0
        """Requests sent to the server."""

    @property
    def root(self) -> str:
        """vLLM serves /score and /rerank beside /v1 as well as under it."""
        return self.base_url.removesuffix("/v1")

    async def start(self) -> None:
        if self._client is None:
            self._client = engine_client(headers=self._headers, timeout=self._timeout)

    async def stop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def run(self, batch: Sequence[Pair]) -> list[float]:
        if len(batch) == 0:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one (query, passage) pair")
        pairs = [_check_pair(self.name, item) for item in batch]
        scores: list[float] = []
        for at in range(0, len(pairs), self.max_pairs):
            scores += await self._score(pairs[at:at + self.max_pairs])
        return scores

    async def _score(self, pairs: list[Pair]) -> list[float]:
        if self._client is None:
            raise EngineUnavailable(self.name, "the engine is not started", "call start() first")
        body = {"model": self.model, "text_1": [q for q, _ in pairs], "text_2": [p for _, p in pairs]}
        self.posts += 1
        try:
            response = await self._client.post(f"{self.root}/score", json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            raise EngineUnavailable(self.name, f"cannot reach {self.root} ({err})", _REMEDY) from err
        if response.status_code != 200:
            raise InvalidRequest(self.name, f"/score answered {response.status_code}: {response.text[:300]}",
                                 "check the model name and that each pair fits the model's context")
        data = sorted(response.json()["data"], key=lambda item: item["index"])
        return [float(item["score"]) for item in data]

    async def health(self) -> Health:
        began = time.perf_counter()
        try:
            [score] = await self.run([("health check", "a passage to score")])
        except Exception as err:  # health reports failures instead of raising them
            return Health(self.name, False, f"{type(err).__name__}: {err}")
        return Health(self.name, True, f"score {score:.4f} from {self.model} at {self.root}", time.perf_counter() - began)


def _check_pair(engine: str, item: object) -> Pair:
    if isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(text, str) for text in item):
        return (item[0], item[1])
    raise InvalidRequest(engine, f"cannot score {type(item).__name__} {item!r:.80}", "pass (query, passage) pairs of strings")
