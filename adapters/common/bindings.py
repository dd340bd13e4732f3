"""Engine bindings: which shared session engine serves a framework object.

An `EngineSpec` names an engine by `(kind, key)`, so the session makes one engine per model
path, server or database however many chains use it, and their requests batch together.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accel.engines.base import Engine
from accel.hosting import HostedLLM, hosted_llm
from accel.registry import EngineRegistry

if TYPE_CHECKING:
    from accel.session import EngineLimits


@dataclass(frozen=True)
class EngineSpec:
    kind: str
    key: Hashable
    factory: Callable[[], Engine]
    limits: EngineLimits | None = None

    def bind(self, registry: EngineRegistry) -> str:
        """The registry's runtime name for this engine (made on first use)."""
        return registry.engine(self.kind, self.key, self.factory, limits=self.limits)


def openai_server(base_url: str, model: str, api_key: str = "EMPTY") -> EngineSpec:
    """A vLLM OpenAI-compatible server, or vLLM's OpenAI layer hosted in this process when
    accel hosts `base_url` (`accel.host_llm`). The scheduler derives priorities; the engine
    sends them only when its start-up probe found the server scheduling by priority (a stock
    server started without `--scheduling-policy priority` rejects any non-zero value)."""
    hosted = hosted_llm(base_url)
    if hosted is not None:
        return _hosted_server(hosted, api_key)

    def make() -> Engine:
        from accel.engines.llm.openai_client import OpenAIServerEngine
        from accel.engines.scaleout import scaled_llm

        return scaled_llm(base_url, lambda url: OpenAIServerEngine(url, model, api_key))

    def limits() -> EngineLimits:
        from accel.session import EngineLimits

        return EngineLimits(use_priority=True)

    return EngineSpec("llm", (base_url.rstrip("/"), model), make, limits())


def _hosted_server(hosted: HostedLLM, api_key: str) -> EngineSpec:
    """One in-process engine per hosted base URL, whatever model name requests carry (the
    hosted server answers a wrong name with 404, as `vllm serve` does)."""

    def make() -> Engine:
        from accel.engines.llm.hosted import HostedServerEngine

        return HostedServerEngine(hosted.base_url, hosted.model, served_model_name=hosted.served_model_name,
                                  max_model_len=hosted.max_model_len, extra_args=hosted.extra_args, api_key=api_key)

    def limits() -> EngineLimits:
        from accel.session import EngineLimits

        return EngineLimits(use_priority=True)

    return EngineSpec("llm", ("hosted", hosted.base_url), make, limits())


MAX_ITEMS_PER_CALL = 4096
"""A count cap on embedder and reranker calls, for memory: calls are sized by duration."""

EMBED_CALL_S = 0.11
"""Expected seconds of one embedder call: 32 query-length texts on the reference machine
(docs/profile.md), the count calls were capped at before they were sized by duration. A query
embedding waits at most about this long behind a call in flight; chunk-length texts go about
2 per call there (their measured max efficient batch), and a faster embedder takes more."""


def embedder(model_path: str) -> EngineSpec:
    def make() -> Engine:
        from accel.engines.embeddings import SentenceTransformerEmbedder
        from accel.engines.scaleout import scaled

        return scaled("embed", lambda: SentenceTransformerEmbedder(model_path))

    def limits() -> EngineLimits:
        from accel.session import EngineLimits

        return EngineLimits(max_batch_size=MAX_ITEMS_PER_CALL, max_call_s=EMBED_CALL_S)

    return EngineSpec("embed", model_path, make, limits())


RERANK_CALL_S = 50.0
"""Expected seconds of one reranker call: 1,024 pairs on the reference machine (20.5 pairs/s,
docs/profile.md), the count it was sized by before. The engine runs a call in length-sorted
forward passes of its own efficient size, so a big call costs no more per pair; what it changes
is that the queries it serves finish reranking together, and their next LLM calls then batch
in vLLM. With one query per call, the queries behind a busy reranker left it one by one and
each one's LLM calls ran alone (advanced RAG, 32 queries, 16 at a time: the server used 2.3x
the CPU time of stock `batch` for the same requests; with 1,024 pairs per call it used less
than stock). Sized by time, a faster reranker takes proportionally more pairs per call."""


def reranker(model_path: str) -> EngineSpec:
    def make() -> Engine:
        from accel.engines.reranker import CrossEncoderReranker
        from accel.engines.scaleout import scaled

        return scaled("rerank", lambda: CrossEncoderReranker(model_path))

    def limits() -> EngineLimits:
        from accel.session import EngineLimits

        return EngineLimits(max_batch_size=MAX_ITEMS_PER_CALL, max_call_s=RERANK_CALL_S)

    return EngineSpec("rerank", model_path, make, limits())


def pgvector(dsn: str) -> EngineSpec:
    def make() -> Engine:
        from accel.engines.vectordb import PgVectorEngine

        return PgVectorEngine(dsn)

    return EngineSpec("vectordb", dsn, make)


def libpq_dsn(sqlalchemy_url: Any) -> str:
    """A libpq DSN from a SQLAlchemy URL (`postgresql+psycopg://...` -> `postgresql://...`)."""
    return sqlalchemy_url.set(drivername="postgresql").render_as_string(hide_password=False)
