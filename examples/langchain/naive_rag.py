"""Document QA with naive RAG (Teola Figure 2): chunk (256 / overlap 30), embed, ingest into
pgvector, retrieve the top 3 chunks, answer in one call with the chunks stuffed in the prompt.

    python -m accel.examples.langchain.naive_rag "How do I push an item onto a heap?"
"""

from __future__ import annotations

import argparse
from operator import itemgetter
from typing import Any

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnablePassthrough

from ..corpus import pydoc_documents
from ..stack import StackConfig, add_arguments, config_from_args
from .models import build_index, chat_model

TOP_K = 3
ANSWER = (
    "Context information is below.\n---------------------\n{context}\n---------------------\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Query: {question}\nAnswer: "
)


def join_chunks(docs: list[Any]) -> str:
    return "\n\n".join(doc.page_content for doc in docs)


def build_app(config: StackConfig, store: Any, *, parallel: bool = False) -> Runnable:
    """`app.invoke({"question": q}) -> str`; one retrieval and one call, nothing to parallelise
    by hand (`parallel` is accepted for the harness and changes nothing)."""
    retriever = store.as_retriever(search_kwargs={"k": TOP_K})
    context = itemgetter("question") | retriever | join_chunks
    return RunnablePassthrough.assign(context=context) | PromptTemplate.from_template(ANSWER) | chat_model(config) | StrOutputParser()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="heapq,bisect,functools")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    app = build_app(config, build_index(config, pydoc_documents(args.modules.split(",")), "example_naive_rag"))
    for question, text in zip(args.questions, app.batch([{"question": q} for q in args.questions])):
        print(f"Q: {question}\nA: {text}\n")


if __name__ == "__main__":
    main()
