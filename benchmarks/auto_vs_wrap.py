"""`ACCEL_AUTO=1` against `accel.wrap` on LangChain docs-style RAG apps with real engines: one
query at a time, stock / wrap / auto interleaved query by query.

    .venv/bin/python -m accel.benchmarks.auto_vs_wrap --base-url http://127.0.0.1:18777/v1 \
        --model tiny --pg-dir /tmp/pg/data [--queries 40]

Apps (LangChain docs shapes over the pydoc corpus in PGVector, MiniLM embeddings, ChatOpenAI
on the vLLM server): the RAG tutorial's preview chain; the qa-sources chain
(`RunnablePassthrough.assign(context=...).assign(answer=...)`); and two retrievers merged by
`RunnablePassthrough.assign`. Each query is asked of the three systems back to back (the order
rotating, so the server's prefix cache favours none), and the answers must be equal. Reported:
median wall seconds per system, and the median [quartiles] of the per-query ratios auto/wrap,
auto/stock, wrap/stock (time ratios: below 1 is faster). Goal (issue 27): auto/wrap 1.00x.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from accel.benchmarks.overhead import auto_mode

SYSTEMS = ("stock", "accel.wrap", "ACCEL_AUTO")
QUESTIONS = ["How do I decode a JSON document?", "What does heapq.heappush do?", "How can text be wrapped to a width?",
             "What is functools.partial for?", "How do I pretty-print JSON?", "What does heapq.nsmallest return?",
             "How do I dedent a block of text?", "What does functools.lru_cache do?"]
MODULES = ("json", "heapq", "textwrap", "functools")


def _format_docs(docs: list[Any]) -> str:
    return "\n\n".join(doc.page_content for doc in docs)


def stores(dsn: str, embed_path: str) -> tuple[Any, Any]:
    """Two PGVector collections of the pydoc pages, chunked as the RAG tutorial chunks."""
    from langchain_core.documents import Document
    from langchain_huggingface import HuggingFaceEmbeddings
    from langchain_postgres import PGVector
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from accel.engines.offline.corpus import stdlib_docs

    docs = [Document(page_content=d.text[:6000], metadata={"source": d.id}) for d in stdlib_docs(MODULES)]
    splits = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200).split_documents(docs)
    url = dsn.replace("postgresql://", "postgresql+psycopg://", 1)
    embeddings = HuggingFaceEmbeddings(model_name=embed_path)
    half = len(splits) // 2
    return tuple(PGVector.from_documents(documents=part, embedding=embeddings, connection=url, use_jsonb=True,
                                         collection_name=f"avw_{uuid.uuid4().hex[:8]}")
                 for part in (splits[:half], splits[half:]))


def apps(store_a: Any, store_b: Any, llm: Any) -> dict[str, tuple[Any, Callable[[str], Any]]]:
    """name -> (chain, the chain's input for a question)."""
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    retriever_a, retriever_b = store_a.as_retriever(), store_b.as_retriever()
    rag_prompt = ChatPromptTemplate.from_messages([("human", "You are an assistant for question-answering tasks. Use the following "
                                                   "pieces of retrieved context to answer the question.\nQuestion: {question} "
                                                   "\nContext: {context} \nAnswer:")])
    preview = {"context": retriever_a | _format_docs, "question": RunnablePassthrough()} | rag_prompt | llm | StrOutputParser()
    sources_prompt = ChatPromptTemplate.from_messages([("system", "Use the retrieved context to answer.\n\n{context}"), ("human", "{input}")])
    from_docs = ({"input": lambda x: x["input"], "context": lambda x: _format_docs(x["context"])}
                 | sources_prompt | llm | StrOutputParser())
    sources = RunnablePassthrough.assign(context=(lambda x: x["input"]) | retriever_a).assign(answer=from_docs)
    merged_prompt = ChatPromptTemplate.from_messages([("system", "Answer from both sources.\nA: {context_a}\nB: {context_b}"),
                                                      ("human", "{question}")])
    merged = (RunnablePassthrough.assign(context_a=(lambda x: x["question"]) | retriever_a | _format_docs,
                                         context_b=(lambda x: x["question"]) | retriever_b | _format_docs)
              | merged_prompt | llm | StrOutputParser())
    return {"rag tutorial preview": (preview, lambda q: q), "qa sources (assign)": (sources, lambda q: {"input": q}),
            "two retrievers (assign)": (merged, lambda q: {"question": q})}


def _answer(result: Any) -> Any:
    return result["answer"] if isinstance(result, dict) else result


def measure(chains: dict[str, tuple[Any, Callable[[str], Any]]], queries: int, progress: Any = None) -> dict[str, Any]:
    """Per app and system: wall and CPU seconds of each single query; answers that differ."""
    import accel

    wrapped = {name: accel.wrap(chain) for name, (chain, _) in chains.items()}
    wall = {name: {s: [] for s in SYSTEMS} for name in chains}
    cpu = {name: {s: [] for s in SYSTEMS} for name in chains}
    differs: list[str] = []
    task = progress.add_task("queries", total=queries * len(chains)) if progress else None
    for name, (chain, make_input) in chains.items():
        for system in SYSTEMS:  # first calls (wrap at first call under auto, templates, connections)
            with auto_mode() if system == "ACCEL_AUTO" else contextlib.nullcontext():
                (wrapped[name] if system == "accel.wrap" else chain).invoke(make_input(QUESTIONS[0]))
    for i in range(queries):
        order = SYSTEMS[i % 3:] + SYSTEMS[:i % 3]
        for name, (chain, make_input) in chains.items():
            question = make_input(QUESTIONS[i % len(QUESTIONS)])
            answers = {}
            for system in order:
                target = wrapped[name] if system == "accel.wrap" else chain
                with auto_mode() if system == "ACCEL_AUTO" else contextlib.nullcontext():
                    start, start_cpu = time.perf_counter(), time.process_time()
                    answers[system] = _answer(target.invoke(question))
                    wall[name][system].append(time.perf_counter() - start)
                    cpu[name][system].append(time.process_time() - start_cpu)
            if len({repr(a) for a in answers.values()}) > 1:
                differs.append(f"{name}: {question!r}")
            if progress:
                progress.advance(task)
    return {"wall": wall, "cpu": cpu, "differs": differs}


def _ratio(a: list[float], b: list[float]) -> str:
    ratios = [x / y for x, y in zip(a, b)]
    q1, q2, q3 = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else (ratios[0],) * 3
    return f"{q2:.3f}x [{q1:.3f}-{q3:.3f}]"


def report(results: dict[str, Any]) -> str:
    lines = [f"{'app':26} {'clock':5} {'stock ms':>9} {'wrap ms':>9} {'auto ms':>9}   {'auto/wrap [IQR]':>21}   "
             f"{'auto/stock [IQR]':>21}   {'wrap/stock [IQR]':>21}",
             "(per single query: median ms; ratios: median of per-query time ratios [quartiles], below 1 is faster)"]
    for clock in ("wall", "cpu"):
        for name, by_system in results[clock].items():
            s, w, a = (by_system[x] for x in SYSTEMS)
            lines.append(f"{name:26} {clock:5} {statistics.median(s) * 1e3:9.1f} {statistics.median(w) * 1e3:9.1f} "
                         f"{statistics.median(a) * 1e3:9.1f}   {_ratio(a, w):>21}   {_ratio(a, s):>21}   {_ratio(w, s):>21}")
    if results["differs"]:
        lines.append(f"ANSWERS DIFFER: {'; '.join(results['differs'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from langchain_openai import ChatOpenAI
    from rich.progress import Progress

    from accel.engines.embeddings import packaged_minilm_path
    from accel.engines.vectordb import start_local_postgres

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="an OpenAI-compatible vLLM server")
    parser.add_argument("--model", required=True, help="its served model name")
    parser.add_argument("--pg-dir", required=True, help="the embedded Postgres data dir (started if stopped; left running)")
    parser.add_argument("--queries", type=int, default=40, help="single queries per app and system")
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args(argv)
    dsn = start_local_postgres(args.pg_dir)
    store_a, store_b = stores(dsn, str(packaged_minilm_path()))
    llm = ChatOpenAI(model=args.model, base_url=args.base_url, api_key="EMPTY", temperature=0, max_tokens=args.max_tokens)
    load = os.getloadavg()
    with Progress(transient=True) as progress:
        results = measure(apps(store_a, store_b, llm), args.queries, progress)
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after; "
          f"{args.queries} single queries per app and system, interleaved")
    print(report(results))


if __name__ == "__main__":
    main()
