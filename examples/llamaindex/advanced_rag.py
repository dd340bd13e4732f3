"""Document QA with advanced RAG (Teola Figure 2) in LlamaIndex: query expansion into 3
queries, 16 chunks each, cross-encoder rerank to the top 3, refine synthesis.

Stock LlamaIndex: a `RetrieverQueryEngine` over a `QueryFusionRetriever` (num_queries=3: the
original plus 2 generated; each retrieves 16; simple fusion keeps all), a
`SentenceTransformerRerank(top_n=3)` postprocessor (`CohereRerank` on a rerank server when the
config names one) and the `refine` synthesizer. With
`parallel=True` the fusion retriever runs its retrievals side by side on a thread pool: the
hand-parallelised variant of a LlamaDistPC-like deployment (its `use_async=True` path runs
each query on a fresh event loop, which PGVectorStore's pooled async engine refuses).

    python -m accel.examples.llamaindex.advanced_rag "How do I push an item onto a heap?"
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

from llama_index.core import VectorStoreIndex, get_response_synthesizer
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..corpus import pydoc_documents
from .models import build_index, embed_model, llm, reranker
from ..stack import StackConfig, add_arguments, config_from_args

NUM_QUERIES = 3
TOP_K = 16
TOP_N = 3


class ParallelQueryFusionRetriever(QueryFusionRetriever):
    """Same queries and fusion; the (query, retriever) retrievals run side by side."""

    def _run_sync_queries(self, queries: list[QueryBundle]) -> dict[tuple[str, int], list[NodeWithScore]]:
        jobs = [(query, i, retriever) for query in queries for i, retriever in enumerate(self._retrievers)]
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            found = list(pool.map(lambda job: job[2].retrieve(job[0]), jobs))
        return {(query.query_str, i): nodes for (query, i, _), nodes in zip(jobs, found)}


def build_app(config: StackConfig, index: VectorStoreIndex, *, parallel: bool = False) -> RetrieverQueryEngine:
    """The app over an indexed store (see `build_index`): `app.query(q).response -> str`."""
    model = llm(config)
    base = index.as_retriever(similarity_top_k=TOP_K, embed_model=embed_model(config))
    kind = ParallelQueryFusionRetriever if parallel else QueryFusionRetriever
    fusion = kind(
        [base], llm=model, num_queries=NUM_QUERIES, mode="simple",
        similarity_top_k=NUM_QUERIES * TOP_K, use_async=False,
    )
    rerank = reranker(config, TOP_N)
    synth = get_response_synthesizer(llm=model, response_mode="refine")
    return RetrieverQueryEngine(fusion, response_synthesizer=synth, node_postprocessors=[rerank])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="heapq,bisect,functools", help="stdlib modules whose pydoc is the corpus")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    app = build_app(config, build_index(config, pydoc_documents(args.modules.split(",")), "example_advanced_rag"))
    for question in args.questions:
        print(f"Q: {question}\nA: {app.query(question).response}\n")


if __name__ == "__main__":
    main()
