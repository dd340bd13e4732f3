"""Search-engine-empowered generation (Teola Figure 2): a proxy LLM drafts an answer, a judge
LLM decides from the draft whether a search is needed (a condition), and the core LLM answers,
with the search results in its prompt when the judge asked for them.

The search engine is the local document index (pgvector similarity search, top 4).

    python -m accel.examples.langchain.search_generation "How do I push an item onto a heap?"
"""

from __future__ import annotations

import argparse
from operator import itemgetter
from typing import Any

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnableBranch, RunnableLambda, RunnableParallel, RunnablePassthrough

from ..corpus import pydoc_documents
from ..stack import StackConfig, add_arguments, config_from_args
from .models import build_index, chat_model
from .naive_rag import join_chunks

TOP_K = 4
DRAFT = "Answer the question briefly.\nQuestion: {question}\nDraft answer: "
JUDGE = (
    "A draft answer to a question is below. Reply 'no' if it is complete and correct, or "
    "'search' if a web search is needed.\nQuestion: {question}\nDraft: {draft}\nDecision: "
)
WITH_RESULTS = "Search results:\n{results}\n\nUsing the search results, answer the question.\nQuestion: {question}\nAnswer: "
WITHOUT = "Improve the draft answer to the question.\nQuestion: {question}\nDraft: {draft}\nAnswer: "


def needs_search(inputs: dict[str, Any]) -> bool:
    """The judge's verdict: search unless it starts with a plain no."""
    return not inputs["verdict"].strip().lower().startswith("no")


def _merge(parts: dict[str, Any]) -> dict[str, Any]:
    return {**parts["judged"], "results": parts["results"]}


def build_app(config: StackConfig, store: Any, *, parallel: bool = False) -> Runnable:
    """`app.invoke({"question": q}) -> str`. `parallel` searches while the proxy drafts and
    the judge decides (speculatively; the results are used only if the judge asks)."""
    proxy, judge_llm, core = chat_model(config, max_tokens=24), chat_model(config, max_tokens=4), chat_model(config)
    draft = PromptTemplate.from_template(DRAFT) | proxy | StrOutputParser()
    judge = PromptTemplate.from_template(JUDGE) | judge_llm | StrOutputParser()
    search = itemgetter("question") | store.as_retriever(search_kwargs={"k": TOP_K}) | join_chunks
    answer_with = PromptTemplate.from_template(WITH_RESULTS) | core | StrOutputParser()
    answer_without = PromptTemplate.from_template(WITHOUT) | core | StrOutputParser()
    decide = RunnablePassthrough.assign(draft=draft) | RunnablePassthrough.assign(verdict=judge)
    if parallel:
        both = RunnableParallel(results=search, judged=decide) | RunnableLambda(_merge)
        return both | RunnableBranch((needs_search, answer_with), answer_without)
    with_search = RunnablePassthrough.assign(results=search) | answer_with
    return decide | RunnableBranch((needs_search, with_search), answer_without)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="heapq,bisect,functools")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    app = build_app(config, build_index(config, pydoc_documents(args.modules.split(",")), "example_search_generation"))
    for question, text in zip(args.questions, app.batch([{"question": q} for q in args.questions])):
        print(f"Q: {question}\nA: {text}\n")


if __name__ == "__main__":
    main()
