"""Lowering a query engine's retrieval (retriever + node postprocessors) to primitives.

    Input(query) -> Embed -> Search -> nodes -> [pairs -> Rerank -> top_n] -> [Call ...] -> Output

Behind a QueryFusionRetriever the rerank may score ahead (`rerank_ahead`): each search's pairs as
it returns, the rerank asking only for the rest. Embed, Search and Rerank go to shared engines, so
they batch across concurrent queries. What
LlamaIndex does around them (rebuilding nodes from rows, ordering by score, other
postprocessors) is its own code, called unchanged, so the nodes and scores are the stock ones.
The nodes report the retriever's, embedding's and reranker's spans and events as they run
(`events`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from accel.adapters.common.classes import is_exactly
from accel.adapters.common.rerank_ahead import merged, missing
from accel.ir import CallOp, GraphBuilder, ItemsOp, Kind, Ref
from accel.registry import EngineRegistry

from . import events, query_trace
from .bindings import Unbound, bind_query_embedding, bind_reranker, bind_vector_store, hits_to_result
from .fusion import is_fusion, lower_fusion
from .prompts import QUERY_PORT
from .rerank_ahead import RerankAhead, SheetedPostprocessOp, plan_rerank_ahead, rerank_pairs

log = logging.getLogger("accel.adapters.llamaindex.retrieval")

SIMILARITY_POSTPROCESSOR = ("llama_index.core.postprocessor.node", "SimilarityPostprocessor")  # cheap: listed as lowered


@dataclass
class RetrievalPlan:
    """What was recognised; `build(builder, session)` lowers it into a graph."""

    retriever: Any
    postprocessors: list[Any]
    lowered: list[str] = field(default_factory=list)
    opaque: list[Unbound] = field(default_factory=list)

    def build(self, b: GraphBuilder, session: EngineRegistry) -> Ref:
        query = b.input(QUERY_PORT)
        ahead = plan_rerank_ahead(self.retriever, self.postprocessors, session, b, query)
        if not isinstance(ahead, RerankAhead):
            log.debug("rerank ahead not used: %s", ahead)
            ahead = None
        nodes = _lower_retriever(self, b, query, session, ahead)
        for i, postprocessor in enumerate(self.postprocessors):
            scored = ahead if i == 0 and ahead is not None and ahead.used else None
            nodes = _lower_postprocessor(self, b.scope(f"post{i}"), postprocessor, query, nodes, session, scored)
        return nodes


def plan_retrieval(retriever: Any, postprocessors: list[Any]) -> RetrievalPlan:
    return RetrievalPlan(retriever, list(postprocessors))


def _is_vector_retriever(retriever: Any) -> bool:
    from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever

    return type(retriever) is VectorIndexRetriever


def _lower_retriever(plan: RetrievalPlan, b: GraphBuilder, query: Ref, session: EngineRegistry,
                     ahead: RerankAhead | None) -> Ref:
    retriever = plan.retriever
    if is_fusion(retriever):
        fused = lower_fusion(b, retriever, query, session, _scored_nodes, None if ahead is None else ahead.searched)
        if not isinstance(fused, Unbound):
            mode = getattr(retriever.mode, "value", retriever.mode)
            decoded = any(node.attrs.get("splittable") for node in b.graph.nodes())
            generation = "Decode(query lines, splittable: decode_pipeline may stream it into Embed/Search)" if decoded else "Call(query generation)"
            plan.lowered.append(f"QueryFusionRetriever({retriever.num_queries} queries, {mode}) -> "
                                f"{generation} + batched Embed/Search per sub-retriever + Call(fusion)")
            return fused
        plan.opaque.append(fused)
        return b.add(Kind.CALL, "retrieve", inputs={"query": query}, op=CallOp(lambda query: retriever.retrieve(_bundle(query))))
    if not _is_vector_retriever(retriever) or not retriever._needs_embedding():
        plan.opaque.append(Unbound(type(retriever).__name__, "not a dense VectorIndexRetriever: retrieve() runs as-is"))
        return b.add(Kind.CALL, "retrieve", inputs={"query": query}, op=CallOp(lambda query: retriever.retrieve(_bundle(query))))
    vectors = _lower_embed(plan, b, query, session)
    k = retriever._similarity_top_k
    search = bind_vector_store(retriever._vector_store, retriever)
    if isinstance(search, Unbound):
        plan.opaque.append(search)

        def store_search(query: str, vectors: list[list[float]]) -> list[Any]:
            with query_trace.under("retrieve"):
                return events.retrieval_ended(retriever._get_nodes_with_embeddings(_bundle(query, vectors[0])))

        return b.add(Kind.CALL, "search", inputs={"query": query, "vectors": vectors}, op=CallOp(store_search))
    plan.lowered.append(f"PGVectorStore search (k={k}) -> Search on {search.collection}")
    hits = b.add(Kind.SEARCH, "search", engine=session.engine(search.engine), inputs={"vectors": vectors},
                 op=ItemsOp("vectors", request=lambda vector, _values: search.request(vector, k)))
    return b.add(Kind.CALL, "nodes", inputs={"hits": hits},
                 op=CallOp(lambda hits: events.retrieval_ended(_scored_nodes(retriever, hits[0]))))


def _lower_embed(plan: RetrievalPlan, b: GraphBuilder, query: Ref, session: EngineRegistry) -> Ref:
    """The query's vector; the retriever's `retrieve` span opens here, the first node."""
    retriever = plan.retriever
    embed_model = retriever._embed_model
    binding = bind_query_embedding(embed_model)
    if isinstance(binding, Unbound):
        plan.opaque.append(binding)

        def embed(query: str) -> list[list[float]]:
            events.retrieval_started(retriever)
            with query_trace.under("retrieve"):
                return [embed_model.get_agg_embedding_from_queries([query])]

        return b.add(Kind.CALL, "embed", inputs={"query": query}, op=CallOp(embed))
    plan.lowered.append(f"{type(embed_model).__name__} -> Embed")

    def texts(query: str) -> list[str]:
        events.retrieval_started(retriever)
        return [query]

    hooks = events.EmbedHooks(embed_model, binding.query_request, "texts")
    texts_ref = b.add(Kind.CALL, "texts", inputs={"query": query}, op=CallOp(texts, blocking=False))
    return b.add(Kind.EMBED, "embed", engine=session.engine(binding.engine), inputs={"texts": texts_ref},
                 op=ItemsOp("texts", request=hooks.request, result=hooks.result))


def _lower_postprocessor(plan: RetrievalPlan, b: GraphBuilder, postprocessor: Any, query: Ref, nodes: Ref,
                         session: EngineRegistry, ahead: RerankAhead | None = None) -> Ref:
    binding = bind_reranker(postprocessor)
    if isinstance(binding, Unbound):
        if not is_exactly(postprocessor, SIMILARITY_POSTPROCESSOR):
            plan.opaque.append(binding)
        else:
            plan.lowered.append("SimilarityPostprocessor -> Call (cheap, run as-is)")
        if ahead is not None:  # a server rerank: its own call, answered from the sheet where it can
            plan.lowered.append(f"{type(postprocessor).__name__}: pairs scored ahead per search (Rerank), "
                                "its own call answered from them")
            return b.add(Kind.CALL, "run", inputs={"query": query, "nodes": nodes, **ahead.inputs()},
                         op=SheetedPostprocessOp(postprocessor))
        return b.add(Kind.CALL, "run", inputs={"query": query, "nodes": nodes},
                     op=CallOp(lambda query, nodes: postprocessor.postprocess_nodes(nodes, query_bundle=_bundle(query))))
    plan.lowered.append(f"SentenceTransformerRerank(top_n={binding.top_n}) -> Rerank"
                        + (" (pairs scored ahead per search, the rest after the fusion)" if ahead is not None else ""))

    def pairs(query: str, nodes: list[Any]) -> list[tuple[str, str]]:
        events.rerank_started(postprocessor, nodes)
        return rerank_pairs(query, nodes)

    def top_n(nodes: list[Any], scores: list[float]) -> list[Any]:
        return events.rerank_ended(postprocessor, _apply_scores(nodes, scores, binding.top_n, binding.keep_retrieval_score))

    pairs_ref = b.add(Kind.CALL, "pairs", inputs={"query": query, "nodes": nodes}, op=CallOp(pairs, blocking=False))
    if ahead is None:
        scores = b.add(Kind.RERANK, "rerank", engine=session.engine(binding.engine), inputs={"pairs": pairs_ref}, op=ItemsOp("pairs"))
        return b.add(Kind.CALL, "top_n", inputs={"nodes": nodes, "scores": scores}, op=CallOp(top_n, blocking=False))
    asked = b.add(Kind.CALL, "ask", inputs={"pairs": pairs_ref, **ahead.inputs()},
                  op=CallOp(lambda pairs, sheet, **_ahead: missing(sheet, pairs), blocking=False))
    scores = b.add(Kind.RERANK, "rerank", engine=session.engine(binding.engine), inputs={"pairs": asked}, op=ItemsOp("pairs"))
    all_scores = b.add(Kind.CALL, "scores", inputs={"pairs": pairs_ref, "sheet": ahead.sheet, "asked": scores},
                       op=CallOp(lambda pairs, sheet, asked: merged(sheet, pairs, asked), blocking=False))
    return b.add(Kind.CALL, "top_n", inputs={"nodes": nodes, "scores": all_scores}, op=CallOp(top_n, blocking=False))


def _bundle(query: str, embedding: list[float] | None = None) -> Any:
    from llama_index.core.schema import QueryBundle

    return QueryBundle(query_str=query, embedding=embedding)


def _scored_nodes(retriever: Any, hits: list[Any]) -> list[Any]:
    """What `VectorIndexRetriever._get_nodes_with_embeddings` does with the store's result."""
    result = hits_to_result(hits)
    absent = retriever._determine_nodes_to_fetch(result)
    if absent:
        fetched = retriever._docstore.get_nodes(node_ids=absent, raise_error=False)
        result.nodes = retriever._insert_fetched_nodes_into_query_result(result, fetched)
    return retriever._convert_nodes_to_scored_nodes(result)


def _apply_scores(nodes: list[Any], scores: list[float], top_n: int, keep_retrieval_score: bool) -> list[Any]:
    """What `SentenceTransformerRerank._postprocess_nodes` does with the model's scores."""
    for node, score in zip(nodes, scores, strict=True):
        if keep_retrieval_score:
            node.node.metadata["retrieval_score"] = node.score
        node.score = score
    return sorted(nodes, key=lambda x: -x.score if x.score else 0)[:top_n]
