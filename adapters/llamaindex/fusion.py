"""QueryFusionRetriever: the expanded queries' embeddings and searches as batched primitives.

With its LLM bound to a vLLM server, query generation is a Decode marked splittable:

    Input(query) -> Call(prompt) -> Decode(the original query, then the generated lines)
                 -> per sub-retriever: Embed -> Search (over the query list)
                 -> Call(fuse: the retriever's own fusion) -> nodes

and the decode-pipelining pass streams it (a PartialDecode whose items are the original query,
then each generated line as soon as its newline arrives, the request aborted once the
retriever has the `num_queries - 1` lines it keeps), mapping Embed and Search onto it, so the
first generated query is embedded and searched while the next ones decode. Otherwise the
generation stays the retriever's own call (an opaque Call). Either way all queries share one
Embed and one Search per sub-retriever unless a pass splits them. Either way, the queries and the fused nodes are the stock ones,
and the nodes report the retriever's spans and events as they run (`events`): the fusion's
`retrieve`, the generation's `complete`, and each query's sub-retrieval with its embedding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accel.ir import CallOp, GraphBuilder, ItemsOp, Kind, Ref
from accel.registry import EngineRegistry

from . import events, query_trace
from .bindings import Unbound, bind_llm, bind_query_embedding, bind_vector_store
from .query_lines import QueryLinesOp, query_prompt

def is_fusion(retriever: Any) -> bool:
    from llama_index.core.retrievers import QueryFusionRetriever

    return type(retriever) is QueryFusionRetriever


def lower_fusion(b: GraphBuilder, retriever: Any, query: Ref, session: EngineRegistry, scored_nodes: Any,
                 searched: Callable[[GraphBuilder, Ref], None] | None = None) -> Ref | Unbound:
    """Lower `retriever` if every sub-retriever is a dense VectorIndexRetriever on bound
    engines; otherwise return why not (the caller keeps it opaque). `searched(scope,
    hits)` may add readers of each sub-retriever's search, in its scope (rerank ahead)."""
    from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever

    bound = []
    for sub in retriever._retrievers:
        if type(sub) is not VectorIndexRetriever or not sub._needs_embedding():
            return Unbound("QueryFusionRetriever", f"sub-retriever {type(sub).__name__} is not a dense VectorIndexRetriever")
        embed, search = bind_query_embedding(sub._embed_model), bind_vector_store(sub._vector_store, sub)
        for binding in (embed, search):
            if isinstance(binding, Unbound):
                return Unbound("QueryFusionRetriever", f"sub-retriever: {binding.component}: {binding.reason}")
        bound.append((sub, embed, search))
    queries = _expand(b, retriever, query, session)
    hits: dict[str, Ref] = {}
    for i, (sub, embed, search) in enumerate(bound):
        s = b.scope(f"r{i}")
        hooks = events.EmbedHooks(sub._embed_model, embed.query_request, "queries", sub=(sub, i))
        vectors = s.add(Kind.EMBED, "embed", engine=session.engine(embed.engine), inputs={"queries": queries},
                        op=ItemsOp("queries", request=hooks.request, result=hooks.result))
        k = sub._similarity_top_k
        hits[f"r{i}"] = s.add(Kind.SEARCH, "search", engine=session.engine(search.engine), inputs={"vectors": vectors},
                              op=ItemsOp("vectors", request=lambda vector, _v, search=search, k=k: search.request(vector, k)))
        if searched is not None:
            searched(s, hits[f"r{i}"])
    subs = [sub for sub, _, _ in bound]

    def fuse(queries: list[str], **hits_by_retriever: list[list[Any]]) -> list[Any]:
        results = {}
        for j, text in enumerate(queries):
            for i, sub in enumerate(subs):
                nodes = scored_nodes(sub, hits_by_retriever[f"r{i}"][j])
                results[(text, i)] = events.retrieval_ended(nodes, key=("sub", i, text))
        return events.retrieval_ended(_fuse(retriever, results))

    return b.add(Kind.CALL, "fuse", inputs={"queries": queries, **hits}, op=CallOp(fuse))


def _expand(b: GraphBuilder, retriever: Any, query: Ref, session: EngineRegistry) -> Ref:
    """The query list: a splittable decode when the retriever's LLM is bound, else its own call."""
    llm = bind_llm(retriever._llm) if retriever.num_queries > 1 else None
    if llm is None or isinstance(llm, Unbound) or llm.fill_max_tokens:

        def expand(query: str) -> list[str]:
            events.retrieval_started(retriever)
            with query_trace.under("retrieve"):
                return _queries(retriever, query)

        return b.add(Kind.CALL, "expand", inputs={"query": query}, op=CallOp(expand))

    def expand_prompt(query: str) -> str | list[dict[str, str]]:
        events.retrieval_started(retriever)
        return query_prompt(retriever, query, llm.chat)

    prompt = b.add(Kind.CALL, "expand.prompt", inputs={"query": query}, op=CallOp(expand_prompt, blocking=False))
    op = QueryLinesOp(llm.params, retriever.num_queries - 1, retriever._llm)
    return b.add(Kind.DECODE, "expand", engine=session.engine(llm.engine), inputs={"prompt": prompt, "query": query},
                 attrs={"splittable": "query lines", "params": llm.params}, op=op)


def _queries(retriever: Any, query: str) -> list[str]:
    """The original query, then the generated ones, as `_retrieve` builds its list."""
    generated = retriever._get_queries(query) if retriever.num_queries > 1 else []
    return [query, *(bundle.query_str for bundle in generated)]


def _fuse(retriever: Any, results: dict[tuple[str, int], list[Any]]) -> list[Any]:
    """The fusion step of `QueryFusionRetriever._retrieve`, by its own methods."""
    from llama_index.core.retrievers.fusion_retriever import FUSION_MODES

    mode, top_k = retriever.mode, retriever.similarity_top_k
    if mode == FUSION_MODES.RECIPROCAL_RANK:
        return retriever._reciprocal_rerank_fusion(results)[:top_k]
    if mode == FUSION_MODES.RELATIVE_SCORE:
        return retriever._relative_score_fusion(results)[:top_k]
    if mode == FUSION_MODES.DIST_BASED_SCORE:
        return retriever._relative_score_fusion(results, dist_based=True)[:top_k]
    if mode == FUSION_MODES.SIMPLE:
        return retriever._simple_fusion(results)[:top_k]
    raise ValueError(f"Invalid fusion mode: {mode}")
