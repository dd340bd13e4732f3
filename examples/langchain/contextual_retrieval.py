"""Contextual retrieval: before indexing, a small LLM writes a short context for each chunk
from its neighbours, which is prepended to the chunk; queries retrieve 32 chunks, a
cross-encoder reranks them to the top 3, and one call answers.

    python -m accel.examples.langchain.contextual_retrieval "How do I push an item onto a heap?"
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnablePassthrough

from ..corpus import pydoc_documents
from ..stack import StackConfig, add_arguments, config_from_args
from .models import chat_model, cross_encoder, embeddings, row_ids, split_documents, vector_store
from .naive_rag import ANSWER, join_chunks

TOP_K = 32
TOP_N = 3
CONTEXT = (
    "<neighbours>\n{before}\n...\n{after}\n</neighbours>\nHere is a chunk from that part of the "
    "document:\n<chunk>\n{chunk}\n</chunk>\nWrite one short sentence that situates this chunk "
    "within the document, to improve its search retrieval.\nContext: "
)


def build_index(config: StackConfig, documents: Iterable[Mapping[str, Any]], collection: str) -> Any:
    """Split, contextualise every chunk from its neighbours (one batched LLM pass), embed and
    ingest the contextualised chunks into a fresh collection."""
    chunks = split_documents(documents)
    writer = PromptTemplate.from_template(CONTEXT) | chat_model(config, max_tokens=24) | StrOutputParser()
    prompts = [
        {"before": chunks[i - 1].page_content if i else "", "after": chunks[i + 1].page_content if i + 1 < len(chunks) else "",
         "chunk": chunk.page_content}
        for i, chunk in enumerate(chunks)
    ]
    contexts = writer.batch(prompts, config={"max_concurrency": 16})
    store = vector_store(config, collection, embeddings(config), fresh=True)
    enriched = [Document(page_content=f"{ctx.strip()}\n{c.page_content}", metadata=c.metadata) for ctx, c in zip(contexts, chunks)]
    store.add_documents(enriched, ids=row_ids(collection, chunks))
    return store


def build_app(config: StackConfig, store: Any, *, parallel: bool = False) -> Runnable:
    """`app.invoke({"question": q}) -> str`: one chain, nothing to parallelise by hand."""
    retriever = ContextualCompressionRetriever(
        base_compressor=CrossEncoderReranker(model=cross_encoder(config), top_n=TOP_N),
        base_retriever=store.as_retriever(search_kwargs={"k": TOP_K}),
    )
    context = itemgetter("question") | retriever | join_chunks
    return RunnablePassthrough.assign(context=context) | PromptTemplate.from_template(ANSWER) | chat_model(config) | StrOutputParser()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="heapq,bisect")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    app = build_app(config, build_index(config, pydoc_documents(args.modules.split(","), 3000), "example_contextual"))
    for question, text in zip(args.questions, app.batch([{"question": q} for q in args.questions])):
        print(f"Q: {question}\nA: {text}\n")


if __name__ == "__main__":
    main()
