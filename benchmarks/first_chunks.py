"""When a streamed answer starts: LangChain's "stream results from your RAG application"
recipe (a parallel of the sources and the question, assigned an answer chain), streamed by the
stock chain and by `accel.wrap`, side by side on one private engine stack.

    .venv/bin/python -m accel.benchmarks.first_chunks [--rounds 8] [--max-tokens 64]

Per call: seconds to the first chunk, to the first chunk of the answer, to the last chunk.
Systems alternate within each round (the order rotating), so machine noise hits each alike;
figures are medians over rounds, ratios taken within each round. A wrapped chain that yields
its dict once (accel before it streamed dict outputs by parts) would show its first answer
chunk at its last chunk's time: the "last" column says what that cost.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

SYSTEMS = ("stock", "accel.wrap")
QUESTIONS = ("How do I push an item onto a heap?", "What does bisect.insort do?", "How do I cache a function's results?",
             "How do I merge sorted iterables?")


def rag_with_sources(model: Any, store: Any) -> Any:
    """The recipe as LangChain's docs write it."""
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableParallel, RunnablePassthrough

    prompt = ChatPromptTemplate.from_messages([("system", "Answer from this context:\n\n{context}"), ("human", "{question}")])
    from_docs = (RunnablePassthrough.assign(context=lambda x: "\n\n".join(d.page_content for d in x["context"]))
                 | prompt | model | StrOutputParser())
    return RunnableParallel({"context": store.as_retriever(search_kwargs={"k": 3}), "question": RunnablePassthrough()}).assign(answer=from_docs)


def timed_stream(app: Any, question: str) -> dict[str, float]:
    start = time.perf_counter()
    first = answer = last = None
    for chunk in app.stream(question):
        now = time.perf_counter() - start
        first = now if first is None else first
        if answer is None and "answer" in chunk:
            answer = now
        last = now
    return {"first": first, "answer": answer, "last": last}


def _spread(values: list[float]) -> str:
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return f"{q2:.3f} ({q1:.3f}-{q3:.3f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args(argv)

    from rich.progress import track

    import accel
    from accel.benchmarks.private_stack import private_stack
    from accel.examples.corpus import pydoc_documents
    from accel.examples.langchain.models import build_index, chat_model

    with private_stack("tiny", max_tokens=args.max_tokens) as config:
        store = build_index(config, pydoc_documents(["heapq", "bisect", "functools"]), "first_chunks")
        stock = rag_with_sources(chat_model(config), store)
        apps = {"stock": stock, "accel.wrap": accel.wrap(stock)}
        for system in SYSTEMS:  # warm: connections, templates, the prefix cache of every question
            for question in QUESTIONS:
                timed_stream(apps[system], question)
        rows: dict[str, list[dict[str, float]]] = {system: [] for system in SYSTEMS}
        for r in track(range(args.rounds), description="rounds"):
            order = SYSTEMS[r % 2:] + SYSTEMS[:r % 2]
            for question in QUESTIONS:
                for system in order:
                    rows[system].append(timed_stream(apps[system], question))
    print(f"{len(QUESTIONS)} questions x {args.rounds} rounds, max_tokens {args.max_tokens}; seconds, median (quartiles)")
    print(f"{'system':<12} {'first chunk':>22} {'first answer':>23} {'last chunk':>21}")
    for system in SYSTEMS:
        cells = [_spread([row[key] for row in rows[system]]) for key in ("first", "answer", "last")]
        print(f"{system:<12} {cells[0]:>22} {cells[1]:>23} {cells[2]:>21}")
    pairs = list(zip(rows["accel.wrap"], rows["stock"], strict=True))
    for key in ("first", "answer", "last"):
        print(f"accel / stock, {key}: {statistics.median(a[key] / s[key] for a, s in pairs):.2f}")
    print(f"accel's first answer chunk / its last chunk (what one dict at the end waited): "
          f"{statistics.median(a['answer'] / a['last'] for a, _ in pairs):.2f}")


if __name__ == "__main__":
    main()
