"""Rerank ahead in LangChain: a MultiQueryRetriever's documents scored as each search returns.

    original question -> Search -> RerankAhead ------------------------------\\
    generated queries (decode lines) -> Embed -> Search -> RerankAhead (mapped) -> sheet
    unique union -> [rerank the pairs the sheet lacks] -> top_n / the cross-encoder's own call

Used under a ContextualCompressionRetriever whose compressor is a `CrossEncoderReranker` and
whose base retriever is a lowered MultiQueryRetriever: its unique union keeps every document its
searches return, so every pair the reranker scores is (the question, a document of some search)
and none is scored in vain. The cross-encoder is either `HuggingFaceCrossEncoder` (lowered: the
Rerank node asks only for the pairs the sheet lacks) or one of the user's own that reaches a
self-hosted rerank server through a Cohere `ClientV2` it holds as `client`, naming the model as
`model` (the shape `examples/langchain/server_rerank.py` has, since LangChain's `CohereRerank`
cannot talk to vLLM). Its `score` still runs, stock code, as stock calls it; the Cohere SDK's
floor plug-in answers its call from the sheet only when the sheet holds every pair, scored on
that same server and model. A guess that does not hold costs the early calls, never the
answer: the call goes out as stock sends it, logged and counted
(`accel.adapters.common.rerank_ahead.misses`). See `accel.adapters.common.rerank_ahead`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from accel.adapters.common.classes import loaded_class
from accel.adapters.common.rerank_ahead import RerankAheadOp, merged, missing, new_sheet
from accel.adapters.langchain.ops import FnOp, top_n_by_score
from accel.adapters.langchain.union import unique_union
from accel.engines.catalogue import EngineSpec
from accel.ir import Kind, Ref

log = logging.getLogger("accel.adapters.langchain.rerank_ahead")


@dataclass
class RerankAhead:
    """The sheet and the rerank-ahead nodes of one compression retriever's graph."""

    sheet: Ref
    ahead: dict[str, Ref] = field(default_factory=dict)

    def inputs(self) -> dict[str, Ref]:
        """What the rerank reads: the sheet, and every rerank-ahead node (so it runs after them)."""
        return {"sheet": self.sheet, **self.ahead}


def score_ahead(cap: Any, docs: Ref, question: Ref, engine: EngineSpec) -> RerankAhead | None:
    """Rerank-ahead nodes over the searches behind `docs` (a lowered MultiQueryRetriever's
    unique union), scoring on `engine`; None when `docs` is no such union."""
    searches = _searches_behind(cap, docs)
    if not searches:
        log.debug("rerank ahead not used: the base retriever is no lowered MultiQueryRetriever")
        return None
    plan = RerankAhead(cap.fn("rerank_ahead.sheet", new_sheet(engine), query=question))
    name = cap.engine(engine)
    for hits, single in searches:
        attrs = {"batchable": False} if single else {"batch_port": "hits"}
        op = RerankAheadOp(page_texts, elementwise=not single, single=single)
        ref = cap.add(Kind.RERANK, "rerank_ahead", engine=name, inputs={"hits": hits, "query": question, "sheet": plan.sheet},
                      attrs=attrs, op=op)
        plan.ahead[f"ahead{len(plan.ahead)}"] = ref
    return plan


def _searches_behind(cap: Any, docs: Ref) -> list[tuple[Ref, bool]]:
    """(search, single) for each search a unique-union node reads: the generated queries' (one
    document list per query) and the original question's (one list)."""
    if docs.key is not None:
        return []
    node = cap.builder.graph.node(docs.node)
    if not isinstance(node.op, FnOp) or node.op.fn is not unique_union:
        return []
    found = [(node.inputs["line_docs"], False)]
    if "original" in node.inputs:
        found.append((node.inputs["original"], True))
    return found


def page_texts(docs: list[Any]) -> list[str]:
    """The texts `CrossEncoderReranker` scores for these documents."""
    return [doc.page_content for doc in docs]


def server_cross_encoder(compressor: Any) -> EngineSpec | str:
    """The rerank server a `CrossEncoderReranker`'s own cross-encoder reaches, as far as its
    attributes tell (a Cohere `ClientV2` as `client`, the model's name as `model`), or why none."""
    from accel.adapters.common.floor.cohere_sdk import server_engine

    reranker_cls = loaded_class("langchain_classic.retrievers.document_compressors.cross_encoder_rerank", "CrossEncoderReranker")
    client_cls = loaded_class("cohere.v2.client", "V2Client")
    if reranker_cls is None or type(compressor) is not reranker_cls:
        return f"compressor {type(compressor).__name__} is no CrossEncoderReranker"
    attributes = getattr(compressor.model, "__dict__", {})
    client, model = attributes.get("client"), attributes.get("model")
    if client_cls is None or not isinstance(client, client_cls) or not isinstance(model, str):
        return f"cross-encoder {type(compressor.model).__name__} holds no Cohere ClientV2 `client` and `model` name"
    return server_engine(client, model)


@dataclass(frozen=True)
class SheetedRerankOp:
    """CrossEncoderReranker.compress_documents (as `RerankOp`) after its pairs were scored
    ahead: the engine is asked for the pairs the sheet lacks, the rest read from it."""

    top_n: int
    elementwise: bool = False

    def _pairs(self, values: dict[str, Any]) -> list[tuple[str, str]]:
        return [(values["query"], text) for text in page_texts(values["docs"])]

    async def requests(self, values: dict[str, Any]) -> list[tuple[str, str]]:
        return missing(values["sheet"], self._pairs(values))

    def output(self, values: dict[str, Any], results: list[float]) -> list[Any]:
        return top_n_by_score(values["docs"], merged(values["sheet"], self._pairs(values), results), self.top_n)
