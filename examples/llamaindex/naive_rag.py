"""Document QA with naive RAG (Teola Figure 2) in LlamaIndex: chunk (256 tokens / overlap 30),
embed, ingest into pgvector, retrieve the top 3 chunks, tree-summarize an answer.

    python -m accel.examples.llamaindex.naive_rag "How do I push an item onto a heap?"
"""

from __future__ import annotations

import argparse

from llama_index.core import VectorStoreIndex, get_response_synthesizer
from llama_index.core.query_engine import RetrieverQueryEngine

from ..corpus import pydoc_documents
from ..stack import StackConfig, add_arguments, config_from_args
from .models import build_index, embed_model, llm

TOP_K = 3


def build_app(config: StackConfig, index: VectorStoreIndex, *, parallel: bool = False) -> RetrieverQueryEngine:
    """`app.query(q).response -> str`. `parallel` runs the tree's summaries concurrently
    (`use_async=True`), the hand-parallelised variant."""
    retriever = index.as_retriever(similarity_top_k=TOP_K, embed_model=embed_model(config))
    synth = get_response_synthesizer(llm=llm(config), response_mode="tree_summarize", use_async=parallel)
    return RetrieverQueryEngine(retriever, response_synthesizer=synth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="heapq,bisect,functools")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    app = build_app(config, build_index(config, pydoc_documents(args.modules.split(",")), "example_naive_rag"))
    for question in args.questions:
        print(f"Q: {question}\nA: {app.query(question).response}\n")


if __name__ == "__main__":
    main()
