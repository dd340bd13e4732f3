"""Engine bindings for encoder servers: one shared embedding or rerank engine per server.

Every client of one server (LangChain `OpenAIEmbeddings`, LlamaIndex `OpenAIEmbedding`, in any
number of apps) reaches the same engine, so their requests are merged across queries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.adapters.common.bindings import EngineSpec
from accel.engines.base import Engine

if TYPE_CHECKING:
    from accel.session import EngineLimits

EMBED_CALLS_PER_RUN = 64
"""Client requests one engine call takes at most; the engine packs them into requests of at
most `MAX_INPUTS` inputs. A server has no saved profile yet, so calls are sized by count."""

RERANK_PAIRS_PER_RUN = 1024
"""(query, passage) pairs one engine call takes at most (one `/score` request)."""


def embed_server(base_url: str, api_key: str = "EMPTY") -> EngineSpec:
    """The embedding server at `base_url` (an OpenAI-style `/v1` root)."""
    root = base_url.rstrip("/")

    def make() -> Engine:
        from accel.engines.embed_server import EmbeddingServerEngine

        return EmbeddingServerEngine(root, api_key)

    def limits() -> EngineLimits:
        from accel.session import EngineLimits

        return EngineLimits(max_batch_size=EMBED_CALLS_PER_RUN)

    return EngineSpec("embed", ("server", root, api_key), make, limits())


def rerank_server(base_url: str, model: str, api_key: str = "EMPTY") -> EngineSpec:
    """The rerank server at `base_url` scoring with `model` (vLLM's `/score`)."""
    root = base_url.rstrip("/")

    def make() -> Engine:
        from accel.engines.rerank_server import RerankServerEngine

        return RerankServerEngine(root, model, api_key)

    def limits() -> EngineLimits:
        from accel.session import EngineLimits

        return EngineLimits(max_batch_size=RERANK_PAIRS_PER_RUN)

    return EngineSpec("rerank", ("server", root, model, api_key), make, limits())
