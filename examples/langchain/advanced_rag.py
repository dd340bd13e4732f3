"""Document QA with advanced RAG (Teola Figure 2): query expansion into 3 queries, 16 chunks
each, cross-encoder rerank to the top 3, refine synthesis.

    question -> LLM writes 2 more queries -> 3 x (embed -> pgvector top-16) -> unique union
             -> cross-encoder rerank -> top 3 -> answer from chunk 1, refined by chunks 2 and 3

Stock LangChain: `MultiQueryRetriever` (original query included) inside a
`ContextualCompressionRetriever` with a `CrossEncoderReranker`; refine is the usual loop over
documents with an answer prompt and a refine prompt. With `parallel=True` the three
retrievals run side by side (a thread pool): the hand-parallelised variant a
LlamaDistPC-like deployment would write.

    python -m accel.examples.langchain.advanced_rag "How do I push an item onto a heap?"
"""

from __future__ import annotations

import argparse
from operator import itemgetter
from typing import Any

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
from langchain_classic.retrievers.multi_query import LineListOutputParser, MultiQueryRetriever
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from ..corpus import pydoc_documents
from .models import build_index, chat_model, cross_encoder
from ..stack import StackConfig, add_arguments, config_from_args

QUERIES_GENERATED = 2  # plus the original question: 3 queries
TOP_K = 16
TOP_N = 3

EXPANSION = (
    "You are an AI language model assistant. Write 2 different versions of the user question "
    "to retrieve relevant documents from a vector database, one per line.\n"
    "Original question: {question}"
)
ANSWER = (
    "Context information is below.\n---------------------\n{context}\n---------------------\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Query: {question}\nAnswer: "
)
REFINE = (
    "The original query is as follows: {question}\nWe have provided an existing answer: {answer}\n"
    "We have the opportunity to refine the existing answer (only if needed) with some more "
    "context below.\n------------\n{context}\n------------\n"
    "Given the new context, refine the original answer to better answer the query. If the "
    "context isn't useful, return the original answer.\nRefined Answer: "
)


class ParallelMultiQueryRetriever(MultiQueryRetriever):
    """Same queries, same union, same order; the per-query retrievals run side by side
    (`batch`, a thread pool) instead of one after another."""

    def retrieve_documents(self, queries: list[str], run_manager: Any) -> list[Any]:
        config = {"callbacks": run_manager.get_child()}
        return [doc for docs in self.retriever.batch(queries, config=config) for doc in docs]


def _retriever(store: Any, llm: Any, config: StackConfig, parallel: bool) -> Runnable:
    expansion = PromptTemplate.from_template(EXPANSION) | llm | LineListOutputParser() | itemgetter(slice(0, QUERIES_GENERATED))
    kind = ParallelMultiQueryRetriever if parallel else MultiQueryRetriever
    expand = kind(retriever=store.as_retriever(search_kwargs={"k": TOP_K}), llm_chain=expansion, include_original=True)
    reranker = CrossEncoderReranker(model=cross_encoder(config), top_n=TOP_N)
    return ContextualCompressionRetriever(base_compressor=reranker, base_retriever=expand)


def build_app(config: StackConfig, store: Any, *, parallel: bool = False) -> Runnable:
    """The app over an indexed `store` (see `build_index`): `app.invoke({"question": q}) -> str`."""
    llm = chat_model(config)
    answer = PromptTemplate.from_template(ANSWER) | llm | StrOutputParser()
    refine = PromptTemplate.from_template(REFINE) | llm | StrOutputParser()

    def refine_over(inputs: dict[str, Any]) -> str:
        docs, question = inputs["docs"], inputs["question"]
        text = answer.invoke({"context": docs[0].page_content if docs else "", "question": question})
        for doc in docs[1:]:
            text = refine.invoke({"question": question, "answer": text, "context": doc.page_content})
        return text

    retriever = _retriever(store, llm, config, parallel)
    return RunnablePassthrough.assign(docs=itemgetter("question") | retriever) | RunnableLambda(refine_over)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="heapq,bisect,functools", help="stdlib modules whose pydoc is the corpus")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    store = build_index(config, pydoc_documents(args.modules.split(",")), "example_advanced_rag")
    app = build_app(config, store)
    for question, text in zip(args.questions, app.batch([{"question": q} for q in args.questions])):
        print(f"Q: {question}\nA: {text}\n")


if __name__ == "__main__":
    main()
