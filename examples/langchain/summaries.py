"""Parrot Figure 1: summaries of a long document, map-reduce style (summarise each chunk
independently, then combine the summaries) and chain style (refine one running summary chunk
by chunk). The long document is the 8 chunks the index returns for the topic asked about.
Map-reduce comes twice: as a Python loop inside a `RunnableLambda` ("map-reduce") and written
with LCEL's `.map()` ("map-reduce-lcel", which stock runs through the chain's `batch`).

    python -m accel.examples.langchain.summaries --style map-reduce "heap queue algorithm"
"""

from __future__ import annotations

import argparse
from operator import itemgetter
from typing import Any, Literal

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from ..corpus import pydoc_documents
from ..stack import StackConfig, add_arguments, config_from_args
from .models import build_index, chat_model

CHUNKS = 8
MAP = "Summarise this part of a document about {question}.\n{chunk}\nSummary: "
REDUCE = "Combine these partial summaries about {question} into one summary.\n{summaries}\nSummary: "
CHAIN_FIRST = "Summarise this document part about {question}.\n{chunk}\nSummary: "
CHAIN_NEXT = "Here is a summary so far about {question}:\n{summary}\nUpdate it with the next part.\n{chunk}\nSummary: "

Style = Literal["map-reduce", "map-reduce-lcel", "chain"]


def build_app(config: StackConfig, store: Any, *, parallel: bool = False, style: Style = "map-reduce") -> Runnable:
    """`app.invoke({"question": topic}) -> str`. Map-reduce maps one chunk after another
    stock (`parallel`: the map calls run side by side); chain is sequential by nature."""
    llm = chat_model(config)
    chunks = itemgetter("question") | store.as_retriever(search_kwargs={"k": CHUNKS})
    with_chunks = RunnablePassthrough.assign(chunks=chunks)
    if style == "chain":
        first = PromptTemplate.from_template(CHAIN_FIRST) | llm | StrOutputParser()
        step = PromptTemplate.from_template(CHAIN_NEXT) | llm | StrOutputParser()

        def refine(inputs: dict[str, Any]) -> str:
            docs, topic = inputs["chunks"], inputs["question"]
            summary = first.invoke({"question": topic, "chunk": docs[0].page_content})
            for doc in docs[1:]:
                summary = step.invoke({"question": topic, "summary": summary, "chunk": doc.page_content})
            return summary

        return with_chunks | RunnableLambda(refine)
    summarise = PromptTemplate.from_template(MAP) | llm | StrOutputParser()
    combine = PromptTemplate.from_template(REDUCE) | llm | StrOutputParser()
    if style == "map-reduce-lcel":
        summaries = RunnableLambda(_jobs) | summarise.map() | RunnableLambda(_bullets)
        return with_chunks | RunnablePassthrough.assign(summaries=summaries) | combine

    def map_all(inputs: dict[str, Any]) -> dict[str, Any]:
        jobs = _jobs(inputs)
        parts = summarise.batch(jobs) if parallel else [summarise.invoke(job) for job in jobs]
        return {"question": inputs["question"], "summaries": _bullets(parts)}

    return with_chunks | RunnableLambda(map_all) | combine


def _jobs(inputs: dict[str, Any]) -> list[dict[str, str]]:
    return [{"question": inputs["question"], "chunk": d.page_content} for d in inputs["chunks"]]


def _bullets(parts: list[str]) -> str:
    return "\n".join(f"- {p.strip()}" for p in parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("topics", nargs="+")
    parser.add_argument("--style", choices=["map-reduce", "map-reduce-lcel", "chain"], default="map-reduce")
    parser.add_argument("--modules", default="heapq,bisect,functools")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    app = build_app(config, build_index(config, pydoc_documents(args.modules.split(",")), "example_summaries"), style=args.style)
    for topic, text in zip(args.topics, app.batch([{"question": t} for t in args.topics])):
        print(f"Topic: {topic}\nSummary: {text}\n")


if __name__ == "__main__":
    main()
