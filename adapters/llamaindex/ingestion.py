"""Ingestion as primitives (Teola's indexing): documents -> node parser -> Embed -> Ingest.

    Input(documents) -> Call(transform: the app's node parsers, run as-is)
                     -> Embed(chunk texts)
                     -> Call(attach: node.embedding, the stock embedding events)
                     -> Ingest(one store.add() per ingestion)  -> Output(nodes)

The embedder is shared with every wrapped app. The Embed is a plain one: the stage-decomposition
pass cuts it into micro-batches of the embedder's measured max efficient batch for chunks, so a
large upload interleaves with the query embeddings of concurrent questions instead of holding
the model for the whole upload (`disabled_passes=["stage_decompose"]` keeps it whole). The node parsers stay opaque Calls (their ids, text and metadata are the
stock ones by construction); rows are written by the store's own `add()` (`VectorStoreWriter`),
so the table layout is the app's own. Ingest reads the whole embedded list: an upload whose
embedding fails writes nothing, as stock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accel.adapters.common.bindings import EngineSpec
from accel.ir import CallOp, GraphBuilder, ItemsOp, Kind
from accel.registry import EngineRegistry

from .bindings import EmbedBinding, Unbound, bind_embedding
from .writer import VectorStoreWriter, raise_failures


@dataclass
class IngestPlan:
    """What one ingestion flow runs: `prefix` transformations (opaque), then the bound
    embedding, then the store's add (None: the caller writes, e.g. an index constructor)."""

    prefix: list[Any]
    embed_model: Any
    binding: EmbedBinding
    store: Any | None
    embed_is_transform: bool  # the embedding is the last transformation (else the index's model)


def plan_ingestion(transformations: list[Any], embed_model: Any | None, store: Any | None) -> IngestPlan | Unbound:
    """Lower `transformations` (+ the index's `embed_model` when they hold no embedding)."""
    from llama_index.core.base.embeddings.base import BaseEmbedding

    transformations = list(transformations)
    embed_positions = [i for i, t in enumerate(transformations) if isinstance(t, BaseEmbedding)]
    if embed_positions and embed_positions != [len(transformations) - 1]:
        return Unbound("IngestionPipeline", "only one embedding, as the last transformation, is lowered")
    in_pipeline = bool(embed_positions)
    model = transformations[-1] if in_pipeline else embed_model
    if model is None:
        return Unbound("IngestionPipeline", "no embedding model: nothing to accelerate")
    binding = bind_embedding(model)
    if isinstance(binding, Unbound):
        return binding
    prefix = transformations[:-1] if in_pipeline else transformations
    return IngestPlan(prefix, model, binding, store, in_pipeline)


def build_ingest_graph(plan: IngestPlan, session: EngineRegistry, run_prefix: Callable[..., Any]) -> Any:
    """The p-graph of one ingestion; `run_prefix(documents=..., options=...)` runs the opaque
    transformations and returns the nodes to embed (and the transformation cache state)."""
    b = GraphBuilder()
    documents, options = b.input("documents"), b.input("options")
    staged = b.add(Kind.CALL, "transform", inputs={"documents": documents, "options": options}, op=CallOp(run_prefix))
    texts = b.add(Kind.CALL, "texts", inputs={"staged": staged}, op=CallOp(_texts, blocking=False))
    binding = plan.binding
    embed = b.add(Kind.EMBED, "embed", engine=session.engine(binding.engine), inputs={"texts": texts},
                  op=ItemsOp("texts", request=lambda text, _values: binding.text_request(text)))
    attach = _Attach(plan.embed_model, binding.batch_size)
    nodes = b.add(Kind.CALL, "attach", inputs={"staged": staged, "vectors": embed}, op=CallOp(attach))
    if plan.store is not None:
        store = plan.store
        spec = EngineSpec("ingest", ("llamaindex-store", id(store)), lambda: VectorStoreWriter(store))
        lists = b.add(Kind.CALL, "rows", inputs={"nodes": nodes}, op=CallOp(_with_embeddings, blocking=False))
        written = b.add(Kind.INGEST, "ingest", engine=session.engine(spec), inputs={"lists": lists},
                        op=ItemsOp("lists", result=lambda _values, results: raise_failures(results), elementwise=False))
        nodes = b.add(Kind.CALL, "done", inputs={"nodes": nodes, "written": written},
                      op=CallOp(lambda nodes, written: nodes, blocking=False))
    b.output(nodes)
    return b.build()


@dataclass
class Staged:
    """The transformed nodes, those still to embed, and the cache entry to fill."""

    nodes: list[Any]
    targets: list[Any]
    cache: Any = None
    cache_key: str | None = None
    collection: str | None = None


def stage_nodes(nodes: list[Any], plan: IngestPlan, cache: Any, collection: str | None, options: dict[str, Any]) -> Staged:
    """Run the opaque transformations as `run_transformations` does (with the pipeline's
    cache when it has one), and look the embedding step up in that cache too. An embedding
    transformation embeds every node; an index embeds only nodes without an embedding."""
    from llama_index.core.ingestion.pipeline import get_transformation_hash, run_transformations

    nodes = list(run_transformations(nodes, plan.prefix, cache=cache, cache_collection=collection, **options))
    if not plan.embed_is_transform:
        return Staged(nodes, [n for n in nodes if n.embedding is None])
    if cache is None:
        return Staged(nodes, nodes)
    key = get_transformation_hash(nodes, plan.embed_model)
    cached = cache.get(key, collection=collection)
    if cached is not None:
        return Staged(list(cached), [])
    return Staged(nodes, nodes, cache, key, collection)


def _texts(staged: Staged) -> list[str]:
    from llama_index.core.schema import MetadataMode

    return [n.get_content(metadata_mode=MetadataMode.EMBED) for n in staged.targets]


@dataclass(frozen=True)
class _Attach:
    """Set each node's embedding, fire the Embedding events stock fires per `embed_batch_size`
    texts, and fill the transformation cache as `run_transformations` does."""

    embed_model: Any
    batch_size: int

    def __call__(self, staged: Staged, vectors: list[list[float]]) -> list[Any]:
        from llama_index.core.schema import MetadataMode

        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in staged.targets]
        fire_embedding_events(self.embed_model, texts, vectors, self.batch_size)
        for node, vector in zip(staged.targets, vectors, strict=True):
            node.embedding = vector
        if staged.cache is not None and staged.cache_key is not None:
            staged.cache.put(staged.cache_key, staged.nodes, collection=staged.collection)
        return staged.nodes


def fire_embedding_events(embed_model: Any, texts: list[str], vectors: list[list[float]], batch_size: int) -> None:
    """EmbeddingStart/End pairs as `get_text_embedding_batch` dispatches them, one per batch,
    each around the EMBEDDING event it reports to the model's callback manager (what the docs'
    `TokenCountingHandler` counts embedding tokens from)."""
    import llama_index.core.instrumentation as instrument
    from llama_index.core.callbacks import CBEventType, EventPayload
    from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent, EmbeddingStartEvent

    dispatcher = instrument.get_dispatcher("llama_index.core.base.embeddings.base")
    model_dict = embed_model.to_payload() if hasattr(embed_model, "to_payload") else embed_model.to_dict()
    manager = getattr(embed_model, "callback_manager", None)
    for start in range(0, len(texts), max(1, batch_size)):
        chunk = slice(start, start + batch_size)
        dispatcher.event(EmbeddingStartEvent(model_dict=model_dict))
        if manager is not None and manager.handlers:
            with manager.event(CBEventType.EMBEDDING, payload={EventPayload.SERIALIZED: model_dict}) as event:
                event.on_end(payload={EventPayload.CHUNKS: texts[chunk], EventPayload.EMBEDDINGS: vectors[chunk]})
        dispatcher.event(EmbeddingEndEvent(chunks=texts[chunk], embeddings=vectors[chunk]))


def _with_embeddings(nodes: list[Any]) -> list[list[Any]]:
    """What the pipeline hands its store: the nodes with embeddings, in one add() (none: no call)."""
    rows = [n for n in nodes if n.embedding is not None]
    return [rows] if rows else []
