"""Which accel engine serves each LlamaIndex component, and the exact request it would send.

A binding is made only when accel's engine reproduces the component's own call: the same
model, the same options, the same request. Anything else returns an `Unbound` reason and the
component stays opaque (run as-is), so a binding never changes an answer. Engines come from
the factories shared with the LangChain adapter, so both frameworks on one server, model or
database share one session engine and their requests batch together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accel.adapters.common.bindings import EngineSpec, embedder, libpq_dsn, openai_server, pgvector, reranker
from accel.adapters.common.classes import is_exactly
from accel.adapters.common.explain import lost_lowering
from accel.adapters.common.openai_fields import refused
from accel.adapters.common.server_encoders import embed_params, openai_embed_engine
from accel.engines.base import SamplingParams, SearchHit, TableLayout, VectorQuery
from accel.engines.embed_server import ServerEmbedRequest
from accel.engines.embeddings import EmbedRequest


@dataclass(frozen=True)
class Unbound:
    """Why a component is not lowered (shown by `explain()`)."""

    component: str
    reason: str


def _class_name(obj: Any) -> str:
    """The component's class name, for `Unbound` labels (classes are told apart by identity)."""
    return type(obj).__name__


# The LlamaIndex classes a binding reproduces, as (defining module, name) for `is_exactly`: a
# user class that shares the name, or a subclass, is not taken for them.
OPENAI_LLMS = (("llama_index.llms.openai_like.base", "OpenAILike"), ("llama_index.llms.openai.base", "OpenAI"))
HUGGINGFACE_EMBEDDING = ("llama_index.embeddings.huggingface.base", "HuggingFaceEmbedding")
SERVER_EMBEDDINGS = (("llama_index.embeddings.openai.base", "OpenAIEmbedding"),
                     ("llama_index.embeddings.openai_like.base", "OpenAILikeEmbedding"))
PG_VECTOR_STORE = ("llama_index.vector_stores.postgres.base", "PGVectorStore")
SBERT_RERANK = ("llama_index.core.postprocessor.sbert_rerank", "SentenceTransformerRerank")


# ---- LLMs ------------------------------------------------------------------------------------
# What the OpenAI completions API (and vLLM's) uses when a request names no max_tokens; the
# chat API then generates up to the end of the context window instead.
COMPLETIONS_DEFAULT_MAX_TOKENS = 16
_SAMPLING_KEYS = frozenset({"max_tokens", "temperature", "top_p", "stop", "seed"})
_BODY_KEYS = frozenset({"model", "prompt", "messages", "stream", "stream_options", "priority", "request_id"})
"""Request fields accel's OpenAI engine sets itself: an extra_body may not override them."""


@dataclass(frozen=True)
class LLMBinding:
    engine: EngineSpec
    params: SamplingParams
    chat: bool
    fill_max_tokens: bool  # a chat app that sends no max_tokens: the server uses what is left of the context


def bind_llm(llm: Any) -> LLMBinding | Unbound:
    """OpenAI / OpenAILike with an `api_base` (a vLLM server), non-streaming, text output: the
    request fields its client sends (`additional_kwargs` included) go unchanged, unless one
    changes the response's shape (`accel.adapters.common.openai_fields`)."""
    name = _class_name(llm)
    if not is_exactly(llm, *OPENAI_LLMS) or not getattr(llm, "api_base", None):
        return Unbound(name, "only OpenAI / OpenAILike LLMs with api_base pointing at a vLLM server are lowered")
    if getattr(llm, "output_parser", None) is not None or getattr(llm, "logprobs", None):
        return Unbound(name, "an output parser or logprobs changes what predict() returns")
    kwargs = dict(llm._get_model_kwargs())
    kwargs.pop("model", None)
    reason = refused(kwargs)
    if reason is not None:
        return Unbound(name, reason)
    extra_body = kwargs.pop("extra_body", None) or {}
    refused_body = _extra_body_refused(extra_body, kwargs)
    if refused_body:
        return Unbound(name, refused_body)
    stop = kwargs.get("stop") or ()
    chat = bool(llm.metadata.is_chat_model)
    params = SamplingParams(
        max_tokens=int(kwargs.get("max_tokens") or COMPLETIONS_DEFAULT_MAX_TOKENS),
        temperature=float(kwargs.get("temperature", 1.0)),
        top_p=float(kwargs.get("top_p", 1.0)),
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        seed=kwargs.get("seed"),
        # a client that sends no top_p leaves it to the server (the model's generation config):
        # accel sends null, which vLLM reads as absent, instead of overriding it with 1.0;
        # every other field the client sends (presence_penalty, logit_bias, user, ...) goes as is
        extra=({} if "top_p" in kwargs else {"top_p": None})
        | {k: v for k, v in kwargs.items() if k not in _SAMPLING_KEYS and v is not None} | extra_body,
    )
    return LLMBinding(
        engine=openai_server(str(llm.api_base), str(llm.model), llm.api_key or "EMPTY"),
        params=params,
        chat=chat,
        fill_max_tokens=chat and "max_tokens" not in kwargs,
    )


def _extra_body_refused(extra_body: Any, kwargs: dict[str, Any]) -> str | None:
    """Why an `extra_body` is not forwarded, or None. The openai SDK merges its fields into the
    request body (vLLM's own options: ignore_eos, top_k, repetition_penalty, ...); accel's
    engine sends them the same way, unless one would override a field the binding sets."""
    if not isinstance(extra_body, dict) or not all(isinstance(k, str) for k in extra_body):
        return "an extra_body that is not a dict of fields is not forwarded"
    overriding = sorted(set(extra_body) & (_SAMPLING_KEYS | _BODY_KEYS | set(kwargs)))
    if overriding:
        return f"extra_body fields {overriding} override request fields accel sets"
    return None


# ---- embeddings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbedBinding:
    engine: EngineSpec
    normalize: bool
    query_prompt: str | None
    text_prompt: str | None = None
    batch_size: int = 10  # the model's embed_batch_size: one stock encode() call, one event pair

    def query_request(self, text: str) -> EmbedRequest:
        return EmbedRequest(text, normalize=self.normalize, prompt=self.query_prompt)

    def text_request(self, text: str) -> EmbedRequest:
        """A document chunk, as `get_text_embedding_batch` encodes it (the "text" prompt)."""
        return EmbedRequest(text, normalize=self.normalize, prompt=self.text_prompt)


def bind_embedding(embed_model: Any) -> EmbedBinding | Unbound:
    """HuggingFaceEmbedding (sentence-transformers) with the model's own sequence length."""
    name = _class_name(embed_model)
    if not is_exactly(embed_model, HUGGINGFACE_EMBEDDING):
        return Unbound(name, "only HuggingFaceEmbedding is lowered to the embedding engine")
    if getattr(embed_model, "embeddings_cache", None) is not None or getattr(embed_model, "_parallel_process", False):
        return Unbound(name, "an embeddings cache or multi-process encoding is run as-is")
    model = embed_model._model
    default_len = _default_max_seq_length(embed_model.model_name)
    if default_len is not None and model.max_seq_length != default_len:
        return Unbound(name, f"max_length={model.max_seq_length} differs from the model's own {default_len}")
    prompts = model.prompts or {}
    return EmbedBinding(embedder(str(embed_model.model_name)), bool(embed_model.normalize),
                        prompts.get("query") or None, prompts.get("text") or None, int(embed_model.embed_batch_size))


@dataclass(frozen=True)
class ServerEmbedBinding:
    """A server's embeddings (OpenAIEmbedding / OpenAILikeEmbedding with an `api_base`) for a
    retriever's queries: `get_query_embedding(q)` is `create(input=[q with newlines replaced
    by spaces], model=<query engine>, **additional_kwargs)`, which `query_request` is."""

    engine: EngineSpec
    params: tuple[tuple[str, Any], ...]

    def query_request(self, text: str) -> ServerEmbedRequest:
        return ServerEmbedRequest(text.replace("\n", " "), self.params)


def bind_query_embedding(embed_model: Any) -> EmbedBinding | ServerEmbedBinding | Unbound:
    """The embedding of a retriever's queries: HuggingFaceEmbedding (`bind_embedding`), or a
    server's OpenAI-style client. Texts (ingestion) are not lowered for the latter: the
    client's own `embed_batch_size` requests go through the floor."""
    if not is_exactly(embed_model, *SERVER_EMBEDDINGS):
        return bind_embedding(embed_model)
    name = _class_name(embed_model)
    bound = _server_binding(embed_model)
    if isinstance(bound, str):
        lost_lowering(name, bound)
        return Unbound(name, f"stays on the floor: {bound}")
    return bound


def _server_binding(embed_model: Any) -> ServerEmbedBinding | str:
    if getattr(embed_model, "embeddings_cache", None) is not None:
        return "an embeddings cache is run as-is"
    spec = openai_embed_engine(embed_model._get_client(), embed_model._get_aclient())
    if isinstance(spec, str):
        return spec
    params = embed_params({"model": embed_model._query_engine, **embed_model.additional_kwargs})
    return params if isinstance(params, str) else ServerEmbedBinding(spec, params)


def _default_max_seq_length(model_name: str) -> int | None:
    import json
    from pathlib import Path

    config = Path(model_name) / "sentence_bert_config.json"
    if not config.is_file():
        return None
    return json.loads(config.read_text()).get("max_seq_length")


# ---- vector stores ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchBinding:
    """PGVectorStore searched by accel's batched pgvector engine (cosine, no filters)."""

    engine: EngineSpec
    collection: TableLayout

    def request(self, vector: list[float], k: int) -> VectorQuery:
        return VectorQuery(vector, k, self.collection, "cosine")


def bind_vector_store(store: Any, retriever: Any) -> SearchBinding | Unbound:
    name = _class_name(store)
    if not is_exactly(store, PG_VECTOR_STORE):
        return Unbound(name, "searched in process by the store itself (a Call node)")
    if retriever._filters is not None or retriever._node_ids or retriever._doc_ids:
        return Unbound(name, "filters / node_ids / doc_ids are applied by the store itself")
    if getattr(retriever, "_kwargs", None):
        return Unbound(name, f"vector_store_kwargs {sorted(retriever._kwargs)} are passed to the store's own query")
    if str(retriever._vector_store_query_mode.value) != "default":
        return Unbound(name, "only the default dense query mode is lowered")
    return bind_store(store)


def bind_store(store: Any) -> SearchBinding | Unbound:
    """A PGVectorStore whose dense search is a plain nearest-neighbour query accel's engine
    reproduces (no hybrid search, halfvec, HNSW settings or customised query)."""
    name = _class_name(store)
    if store.hybrid_search:
        return Unbound(name, "only the default dense query mode is lowered")
    hnsw = store.hnsw_kwargs or {}
    if getattr(store, "use_halfvec", False) or hnsw:
        return Unbound(name, "halfvec columns and HNSW search settings are run by the store itself")
    if getattr(store, "_customize_query_fn", None) is not None:
        return Unbound(name, "a customised query is run by the store itself")
    from sqlalchemy.engine import make_url

    from accel.adapters.llamaindex.tables import pgvector_table

    return SearchBinding(pgvector(libpq_dsn(make_url(store.connection_string))), pgvector_table(store.table_name, store.schema_name))


def hits_to_result(hits: list[SearchHit]) -> Any:
    """A PGVectorStore query result rebuilt from engine hits, as the store itself builds it."""
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.types import VectorStoreQueryResult
    from llama_index.core.vector_stores.utils import metadata_dict_to_node

    nodes = []
    for hit in hits:
        try:
            node = metadata_dict_to_node(hit.metadata)
            node.set_content(str(hit.text))
        except Exception:  # the store's own fallback for legacy rows
            node = TextNode(id_=hit.id, text=hit.text, metadata=hit.metadata)
        nodes.append(node)
    return VectorStoreQueryResult(nodes=nodes, similarities=[1 - h.score for h in hits], ids=[h.id for h in hits])


# ---- rerankers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RerankBinding:
    engine: EngineSpec
    top_n: int
    keep_retrieval_score: bool


def bind_reranker(postprocessor: Any) -> RerankBinding | Unbound:
    name = _class_name(postprocessor)
    if not is_exactly(postprocessor, SBERT_RERANK):
        return Unbound(name, "only SentenceTransformerRerank is lowered to the rerank engine")
    model = postprocessor._model
    path = str(postprocessor.model)
    tokenizer_max = getattr(model.tokenizer, "model_max_length", None)
    if model.max_seq_length not in (None, tokenizer_max):
        return Unbound(name, f"max_length={model.max_seq_length} differs from the tokenizer's {tokenizer_max}")
    return RerankBinding(reranker(path), int(postprocessor.top_n), bool(postprocessor.keep_retrieval_score))
