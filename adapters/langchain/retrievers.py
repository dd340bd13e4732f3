"""Retrievers as primitives: vector search -> Embed + Search, cross-encoder compression ->
Rerank, multi-query expansion -> Decode (lines) feeding Embed + Search per generated query.

Only configurations whose stock behaviour the primitives reproduce exactly are lowered
(similarity search on langchain-postgres PGVector with HuggingFaceEmbeddings or a server's
OpenAIEmbeddings, CrossEncoderReranker over HuggingFaceCrossEncoder); the rest run as-is (their
engine calls still captured by the floor). A compression retriever with any other compressor
keeps its base retriever lowered and runs the compressor as user code, as stock calls it. Over
a MultiQueryRetriever a cross-encoder's pairs are scored as each search returns
(`rerank_ahead`). A
server embedding that could be lowered but for one of its options is a lowering lost
(`explain.lost_lowering`): logged and counted per reason, and shown as opaque in `explain()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accel.adapters.common import bindings
from accel.adapters.common.bindings import EngineSpec
from accel.adapters.common.classes import is_exactly, loaded_class
from accel.adapters.common.explain import lost_lowering
from accel.adapters.common.server_encoders import embed_params, openai_embed_engine
from accel.adapters.langchain.ops import CompressOp, EmbedTextsOp, RerankOp, SearchOp
from accel.adapters.langchain.union import unique_union
from accel.adapters.langchain.rerank_ahead import SheetedRerankOp, score_ahead, server_cross_encoder
from accel.adapters.langchain.tables import pgvector_collection
from accel.engines.base import TableLayout
from accel.ir import Kind, Ref

_METRICS = {"cosine": "cosine", "l2": "l2", "inner": "ip"}
_CPU_ONLY = ({}, {"device": "cpu"})


@dataclass(frozen=True)
class VectorPlan:
    embed: EngineSpec
    normalize: bool
    server: tuple[tuple[str, Any], ...] | None
    """The request fields of a server embedding client (None: sentence-transformers)."""
    store: EngineSpec
    collection: TableLayout
    k: int
    metric: str
    filter: dict[str, Any] | None
    unsupported: dict[str, str]
    """Entry kinds ("sync", "async") the store's own search refuses, with why: a PGVector made
    without `async_mode` raises on async calls and one made with it on sync calls."""

    @property
    def embed_label(self) -> str:
        return "Embed" if self.server is None else f"Embed (server {dict(self.server)['model']})"


def lower_retriever(cap: Any, retriever: Any, x: Ref) -> Ref:
    from accel.adapters.langchain.capture import Opaque

    vector_cls = loaded_class("langchain_core.vectorstores.base", "VectorStoreRetriever")
    compression_cls = loaded_class("langchain_classic.retrievers.contextual_compression", "ContextualCompressionRetriever")
    multi_cls = loaded_class("langchain_classic.retrievers.multi_query", "MultiQueryRetriever")
    if vector_cls is not None and type(retriever) is vector_cls:
        plan = vector_plan(retriever)
        cap.note(retriever, True, f"{plan.embed_label} + Search {plan.collection} k={plan.k}")
        return search(cap, plan, x, many=False)
    if compression_cls is not None and type(retriever) is compression_cls:
        return compression(cap, retriever, x)
    if multi_cls is not None and type(retriever) is multi_cls:
        return multi_query(cap, retriever, x)
    raise Opaque(f"{type(retriever).__name__} has no lowering; it runs as-is")


def vector_plan(retriever: Any) -> VectorPlan:
    """Check a VectorStoreRetriever is one whose search the primitives reproduce exactly."""
    from accel.adapters.langchain.capture import Opaque

    pgvector_cls = loaded_class("langchain_postgres.vectorstores", "PGVector")
    store = retriever.vectorstore
    if pgvector_cls is None or type(store) is not pgvector_cls:
        raise Opaque(f"vector store {type(store).__name__} is searched by its own code")
    if retriever.search_type != "similarity":
        raise Opaque(f"search_type={retriever.search_type!r} (only 'similarity' is lowered)")
    extra = set(retriever.search_kwargs) - {"k", "filter"}
    if extra:
        raise Opaque(f"search_kwargs {sorted(extra)} are not lowered")
    flt = retriever.search_kwargs.get("filter")
    if flt is not None and not store.use_jsonb:
        raise Opaque("metadata filters on a non-JSONB PGVector table")
    metric = _METRICS.get(getattr(store._distance_strategy, "value", store._distance_strategy))
    if metric is None:
        raise Opaque(f"distance strategy {store._distance_strategy!r}")
    engine = store._engine if store._engine is not None else store._async_engine
    embed, normalize, server = embedder_plan(store.embeddings)
    unsupported = {}
    if store._async_engine is None:
        unsupported["async"] = f"PGVector {store.collection_name!r} is sync-only (async_mode=False): stock's async search raises"
    if store._engine is None:
        unsupported["sync"] = f"PGVector {store.collection_name!r} is async-only (async_mode=True): stock's sync search raises"
    return VectorPlan(
        embed=embed,
        normalize=normalize,
        server=server,
        store=bindings.pgvector(bindings.libpq_dsn(engine.url)),
        collection=pgvector_collection(store.collection_name),
        k=int(retriever.search_kwargs.get("k", 4)),
        metric=metric,
        filter=flt,
        unsupported=unsupported,
    )


def embedder_plan(embeddings: Any) -> tuple[EngineSpec, bool, tuple[tuple[str, Any], ...] | None]:
    """HuggingFaceEmbeddings on a local sentence-transformers model, default encode options;
    or OpenAIEmbeddings on a server (`server_plan`). Returns the engine, the normalisation and
    the server request fields."""
    from accel.adapters.langchain.capture import Opaque

    server_cls = loaded_class("langchain_openai.embeddings.base", "OpenAIEmbeddings")
    if server_cls is not None and type(embeddings) is server_cls:
        return server_plan(embeddings)
    classes = tuple(c for c in (loaded_class("langchain_huggingface.embeddings.huggingface", "HuggingFaceEmbeddings"),
                                loaded_class("langchain_community.embeddings.huggingface", "HuggingFaceEmbeddings")) if c)
    if not classes or not isinstance(embeddings, classes):
        raise Opaque(f"embeddings {type(embeddings).__name__} are computed by their own code")
    if getattr(embeddings, "multi_process", False) or embeddings.model_kwargs not in _CPU_ONLY:
        raise Opaque("embedding model options (multi_process / model_kwargs) are not lowered")
    options = getattr(embeddings, "query_encode_kwargs", None) or embeddings.encode_kwargs
    if set(options) - {"normalize_embeddings", "batch_size"}:
        raise Opaque(f"encode options {sorted(options)} are not lowered")
    return bindings.embedder(str(embeddings.model_name)), bool(options.get("normalize_embeddings", False)), None


def server_plan(embeddings: Any) -> tuple[EngineSpec, bool, tuple[tuple[str, Any], ...]]:
    """OpenAIEmbeddings whose query request an Embed node sends exactly: `embed_query(text)`
    is `client.create(input=[text], **_invocation_params)` (one text is within any
    `chunk_size`), the text as it is. With `check_embedding_ctx_length` (the default) the client
    tokenizes with tiktoken and sends token ids, chunked and averaged per text: that stays on
    the floor, where the client's own request is sent."""
    from accel.adapters.langchain.capture import Opaque

    bound = _server_binding(embeddings)
    if isinstance(bound, str):
        lost_lowering(type(embeddings).__name__, bound)
        raise Opaque(f"embeddings {type(embeddings).__name__} stay on the floor: {bound}")
    return bound[0], False, bound[1]


def _server_binding(embeddings: Any) -> tuple[EngineSpec, tuple[tuple[str, Any], ...]] | str:
    if embeddings.check_embedding_ctx_length:
        return "check_embedding_ctx_length=True: the client sends its own tiktoken token ids"
    if embeddings.client is None or embeddings.async_client is None:
        return "its API key is a provider function"
    spec = openai_embed_engine(getattr(embeddings.client, "_client", None), getattr(embeddings.async_client, "_client", None))
    if isinstance(spec, str):
        return spec
    params = embed_params(dict(embeddings._invocation_params))
    return params if isinstance(params, str) else (spec, params)


def search(cap: Any, plan: VectorPlan, query: Ref, *, many: bool) -> Ref:
    cap.unsupported_entries.update(plan.unsupported)
    embed = cap.add(Kind.EMBED, "embed", engine=cap.engine(plan.embed), inputs={"texts": query},
                    op=EmbedTextsOp("texts", normalize=plan.normalize, single=not many, elementwise=many, server=plan.server),
                    attrs={"batchable": many})
    op = SearchOp("vectors", plan.collection, plan.k, plan.metric, plan.filter, single=not many, elementwise=many)
    return cap.add(Kind.SEARCH, "search", engine=cap.engine(plan.store), inputs={"vectors": embed}, op=op, attrs={"batchable": many})


def compression(cap: Any, retriever: Any, x: Ref) -> Ref:
    """CrossEncoderReranker over HuggingFaceCrossEncoder -> Rerank after the base retrieval.
    Any other compressor runs as user code (`CompressOp`, as stock calls it) after the base
    retriever, which is still lowered; with no engine work in the base retriever either, the
    whole retriever runs as-is."""
    compressor = retriever.base_compressor
    why = _rerank_refusal(compressor)
    if why is not None:
        return user_compression(cap, retriever, x, why)
    docs = cap.lower(retriever.base_retriever, x)
    spec = bindings.reranker(str(compressor.model.model_name))
    ahead = score_ahead(cap, docs, x, spec)
    if ahead is None:
        cap.note(retriever, True, f"Rerank top_n={compressor.top_n}")
        return cap.add(Kind.RERANK, "rerank", engine=cap.engine(spec), inputs={"query": x, "docs": docs},
                       op=RerankOp(compressor.top_n), attrs={"batchable": False})
    cap.note(retriever, True, f"Rerank top_n={compressor.top_n} (pairs scored ahead per search, the rest after the union)")
    return cap.add(Kind.RERANK, "rerank", engine=cap.engine(spec), inputs={"query": x, "docs": docs, **ahead.inputs()},
                   op=SheetedRerankOp(compressor.top_n), attrs={"batchable": False})


def _rerank_refusal(compressor: Any) -> str | None:
    """Why `compressor` is not a Rerank primitive (None: it is one)."""
    reranker_cls = loaded_class("langchain_classic.retrievers.document_compressors.cross_encoder_rerank", "CrossEncoderReranker")
    encoder_cls = loaded_class("langchain_community.cross_encoders.huggingface", "HuggingFaceCrossEncoder")
    if reranker_cls is None or type(compressor) is not reranker_cls:
        return f"compressor {type(compressor).__name__} has no lowering"
    if encoder_cls is None or type(compressor.model) is not encoder_cls or compressor.model.model_kwargs not in _CPU_ONLY:
        return f"cross-encoder {type(compressor.model).__name__} is scored by its own code"
    return None


def user_compression(cap: Any, retriever: Any, x: Ref, why: str) -> Ref:
    """The base retriever lowered, then the compressor as user code (`CompressOp`): its
    callbacks are the retriever run's child, as stock hands them, so its own runs match."""
    from accel.adapters.langchain.capture import Opaque

    if not cap.has_engine_work(retriever.base_retriever):
        raise Opaque(f"{why}, and its base retriever has no engine work to lower")
    docs = cap.lower(retriever.base_retriever, x)
    name = type(retriever.base_compressor).__name__
    server = server_cross_encoder(retriever.base_compressor)
    ahead = None if isinstance(server, str) else score_ahead(cap, docs, x, server)
    scored = "; pairs scored ahead per search on its rerank server, its call answered from them" if ahead else ""
    cap.note(retriever, True, f"base retriever lowered; {why}: its compress_documents runs as user code{scored}")
    alone = cap.leaf_root and retriever is cap.first_step
    op = CompressOp(retriever.base_compressor, spec=cap._parent, alone=alone)  # _parent: the retriever's own run spec
    inputs = {"query": x, "docs": docs, "config": cap.config, "run": cap.run, "runs": cap.runs_in, "caller": cap.caller}
    return cap.add(Kind.CALL, f"call:{name}.compress_documents:", inputs={**inputs, **(ahead.inputs() if ahead else {})}, op=op)


_LEGACY_LLM_CHAINS = (("langchain_classic.chains.llm", "LLMChain"), ("langchain.chains.llm", "LLMChain"))  # 1.x, 0.x

def multi_query(cap: Any, retriever: Any, x: Ref) -> Ref:
    """Query expansion: the LLM chain's lines each go to Embed + Search as soon as the decode
    parses them (decode pipelining); the original query is searched alongside."""
    from accel.adapters.langchain.capture import Opaque
    from langchain_core.runnables import Runnable

    if not isinstance(retriever.llm_chain, Runnable) or is_exactly(retriever.llm_chain, *_LEGACY_LLM_CHAINS):
        raise Opaque("a legacy LLMChain query generator")
    try:
        plan = vector_plan(retriever.retriever)
    except Opaque as why:
        raise Opaque(f"its inner retriever is not lowered ({why})") from None
    question = cap.fn("question", lambda value: {"question": value}, value=x)
    lines = cap.lower(retriever.llm_chain, question)
    per_line = search(cap, plan, lines, many=True)
    each = cap.open_run("retriever", retriever.retriever, lines, None, each=True)  # stock: one run per generated query
    cap.close_run(each, per_line)
    inputs = {"line_docs": per_line}
    if retriever.include_original:
        inputs["original"] = search(cap, plan, x, many=False)
        original = cap.open_run("retriever", retriever.retriever, x, None, after=each.id)
        cap.close_run(original, inputs["original"])
    cap.note(retriever, True, f"generated queries -> {plan.embed_label} + Search {plan.collection} k={plan.k} each, unique union")
    return cap.fn("unique_union", unique_union, **inputs)
