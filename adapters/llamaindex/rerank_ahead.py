"""Rerank ahead in LlamaIndex: a QueryFusionRetriever's chunks scored as each search returns.

    searches (per sub-retriever, over the query list) -> RerankAhead (mapped) -> sheet
    fuse -> [rerank the pairs the sheet lacks] -> top_n / the postprocessor's own call

Used when the first node postprocessor is a cross-encoder rerank accel can send to an engine
(`SentenceTransformerRerank`, or `CohereRerank` on a self-hosted server) and the fusion keeps
every chunk its searches can return (`similarity_top_k` at least the queries times the
sub-retrievers' top k): then every pair the rerank scores is a (question, chunk) of some
search, and none is scored in vain. See `accel.adapters.common.rerank_ahead`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from accel.adapters.common.bindings import EngineSpec
from accel.adapters.common.classes import is_exactly
from accel.adapters.common.rerank_ahead import RerankAheadOp, missing, new_sheet, using
from accel.ir import CallOp, GraphBuilder, Kind, Ref
from accel.registry import EngineRegistry

from .bindings import Unbound, bind_reranker, hits_to_result
from .fusion import is_fusion

COHERE_RERANK = ("llama_index.postprocessor.cohere_rerank.base", "CohereRerank")

log = logging.getLogger("accel.adapters.llamaindex.rerank_ahead")
unanswered: Counter[type] = Counter()
"""Server reranks that found pairs missing from the sheet and sent their own call, per class."""


@dataclass
class RerankAhead:
    """The plan for one retrieval graph (`root`, its `query` input): which engine scores ahead;
    the refs its nodes made."""

    engine: EngineSpec
    session: EngineRegistry
    root: GraphBuilder
    query: Ref
    sheet: Ref | None = None
    ahead: dict[str, Ref] = field(default_factory=dict)

    def searched(self, s: GraphBuilder, hits: Ref) -> None:
        """One sub-retriever's search (one hit list per query): score its pairs ahead."""
        if self.sheet is None:
            self.sheet = self.root.add(Kind.CALL, "rerank_ahead.sheet", inputs={"query": self.query},
                                       op=CallOp(new_sheet(self.engine), blocking=False))
        ref = s.add(Kind.RERANK, "rerank_ahead", engine=self.session.engine(self.engine),
                    inputs={"hits": hits, "query": self.query, "sheet": self.sheet}, attrs={"batch_port": "hits"},
                    op=RerankAheadOp(rerank_texts))
        self.ahead[f"ahead{len(self.ahead)}"] = ref

    @property
    def used(self) -> bool:
        return self.sheet is not None

    def inputs(self) -> dict[str, Ref]:
        """What the rerank reads: the sheet, and every rerank-ahead node (so it runs after them)."""
        return {"sheet": self.sheet, **self.ahead}


def plan_rerank_ahead(retriever: Any, postprocessors: list[Any], session: EngineRegistry, b: GraphBuilder,
                      query: Ref) -> RerankAhead | str:
    """A plan for the graph `b` builds when scoring ahead can only save time, else why not."""
    if not is_fusion(retriever):
        return "not a QueryFusionRetriever"
    if not postprocessors:
        return "no rerank"
    engine = rerank_engine(postprocessors[0])
    if isinstance(engine, str):
        return engine
    subs = retriever._retrievers
    most = retriever.num_queries * sum(int(getattr(sub, "_similarity_top_k", 0) or 0) for sub in subs)
    if retriever.similarity_top_k < most:
        return f"the fusion keeps its top {retriever.similarity_top_k} of up to {most} chunks"
    return RerankAhead(engine, session, b, query)


def rerank_engine(postprocessor: Any) -> EngineSpec | str:
    """The rerank engine `postprocessor` scores its pairs on, or why it has none."""
    if is_exactly(postprocessor, COHERE_RERANK):
        from accel.adapters.common.floor.cohere_sdk import server_engine

        return server_engine(postprocessor._client, postprocessor.model)
    binding = bind_reranker(postprocessor)
    return binding.reason if isinstance(binding, Unbound) else binding.engine


def rerank_text(node: Any) -> str:
    """The text a cross-encoder postprocessor scores for a node (`SentenceTransformerRerank`,
    `CohereRerank`: `get_content(MetadataMode.EMBED)`)."""
    from llama_index.core.schema import MetadataMode

    return node.get_content(metadata_mode=MetadataMode.EMBED)


def rerank_pairs(query: str, nodes: list[Any]) -> list[tuple[str, str]]:
    """The (question, text) pairs a rerank of these scored nodes asks for."""
    return [(query, rerank_text(n.node)) for n in nodes]


def rerank_texts(hits: Any) -> list[str]:
    """The texts a rerank of these search hits' nodes scores."""
    return [rerank_text(node) for node in hits_to_result(hits).nodes]


@dataclass(frozen=True)
class SheetedPostprocessOp:
    """A server rerank's own call (`postprocess_nodes`, stock code) after its pairs were scored
    ahead. With every pair on the sheet it runs on the session loop: the Cohere SDK's floor
    plug-in answers from the sheet, no engine call is left, and what remains is 0.3 ms of
    ranking (as a worker-thread call it waited up to 0.2 s for the GIL in a LlamaIndex batch of
    32 on the twins). A pair missing (an early call failed) sends the call as stock sends it,
    from a worker thread: logged and counted (`unanswered`)."""

    postprocessor: Any

    async def compute(self, values: dict[str, Any]) -> list[Any]:
        from llama_index.core.schema import QueryBundle

        from accel.adapters.common.floor.cohere_sdk import COMPONENT
        from accel.adapters.common.floor.plugins import is_patched

        query, nodes, sheet = values["query"], values["nodes"], values["sheet"]

        def run() -> list[Any]:
            with using(sheet):
                return self.postprocessor.postprocess_nodes(nodes, query_bundle=QueryBundle(query_str=query))

        lacking = missing(sheet, rerank_pairs(query, nodes))
        if not lacking and is_patched(COMPONENT):
            return run()
        unanswered[type(self.postprocessor)] += 1
        log.info("rerank ahead: %d of %d pairs not scored ahead; %s sends its own call", len(lacking), len(nodes),
                 type(self.postprocessor).__name__)
        return await asyncio.to_thread(run)
