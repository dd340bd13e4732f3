"""Concurrent async calls, stock and `accel.wrap`: the examples' LangChain apps (or the LangGraph
research graph) answering a batch of `ainvoke`s gathered on one event loop, as an async server
serves them, beside the same apps' thread-pool `batch`, on the stack `accel up` started (the
engine twins with `accel up --twin h100-8b`).

    ACCEL_HOME=<home> .venv/bin/python -m accel.benchmarks.async_callers \\
        [--app advanced-rag|naive-rag|research-graph] [--queries 32] [--rounds 6] \\
        [--default-executor N] [--systems stock,accel,stock-events,accel-events,stock-batch,accel-batch]

Stock's `ainvoke` hands sync steps to the loop's default executor, `min(32, CPUs + 4)`
threads unless `--default-executor` sets another size (a host with more cores).
`*-events` read `astream_events(version="v2")` to its end instead of `ainvoke`. The LangChain
apps' store is the examples' collection opened in async mode (stock's async retrieval needs
it). Systems alternate within each round (the order rotating); figures are medians over the
rounds after the first (warm-up), with the process's CPU per batch. Every system's answers are
compared with stock's.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

APPS = {"advanced-rag": "langchain.advanced_rag", "naive-rag": "langchain.naive_rag", "research-graph": "langgraph.research_graph"}


def _build(app: str, queries: int) -> tuple[dict[str, Any], list[Any]]:
    """The apps over a freshly indexed collection, by system: "stock" and "accel" for `ainvoke`
    (LangChain's over the store in async mode), "stock-batch" and "accel-batch" for `batch`
    (over the store in sync mode, as the examples build it); and the inputs."""
    import accel
    from accel.benchmarks.workload import build_workload
    from accel.examples.langchain.models import build_index, embeddings
    from accel.examples.stack import load_config, sqlalchemy_url

    config = load_config()
    workload = build_workload(queries)
    collection = f"async_callers_{app.replace('-', '_')}"
    store = async_store = build_index(config, workload.documents, collection)
    if app != "research-graph":
        from langchain_postgres import PGVector

        async_store = PGVector(embeddings=embeddings(config), collection_name=collection, use_jsonb=True,
                               connection=sqlalchemy_url(config.pg_dsn, "psycopg"), async_mode=True)
    build = importlib.import_module(f"accel.examples.{APPS[app]}").build_app
    apps = {"stock": build(config, async_store), "accel": accel.wrap(build(config, async_store)),
            "stock-batch": build(config, store), "accel-batch": accel.wrap(build(config, store))}
    return apps, [{"question": q} for q in workload.questions]


async def _events(app: Any, value: Any) -> Any:
    output = None
    async for event in app.astream_events(value, version="v2"):
        if event["event"] == "on_chain_end" and not event["parent_ids"]:
            output = event["data"]["output"]
    return output


async def _gather(app: Any, inputs: list[Any], events: bool) -> list[Any]:
    return await asyncio.gather(*((_events(app, v) if events else app.ainvoke(v)) for v in inputs))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", choices=sorted(APPS), default="advanced-rag")
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--default-executor", type=int, default=None, help="threads of the loop's default executor")
    parser.add_argument("--systems", default="stock,accel,stock-batch,accel-batch")
    args = parser.parse_args(argv)

    apps, inputs = _build(args.app, args.queries)
    systems = args.systems.split(",")
    loop = asyncio.new_event_loop()
    if args.default_executor:
        loop.set_default_executor(ThreadPoolExecutor(args.default_executor))
    times: dict[str, list[float]] = {name: [] for name in systems}
    cpu: dict[str, list[float]] = {name: [] for name in systems}
    answers: dict[str, list[Any]] = {}
    try:
        for round_ in range(args.rounds):
            for name in systems[round_ % len(systems):] + systems[:round_ % len(systems)]:
                system, _, how = name.partition("-")
                start, start_cpu = time.perf_counter(), time.process_time()
                if how == "batch":
                    out = apps[name].batch(inputs, config={"max_concurrency": len(inputs)})
                else:
                    out = loop.run_until_complete(_gather(apps[system], inputs, how == "events"))
                if round_:
                    times[name].append(time.perf_counter() - start)
                    cpu[name].append(time.process_time() - start_cpu)
                answers.setdefault(name, out)
    finally:
        loop.close()
    threads = args.default_executor or f"asyncio's {min(32, (os.cpu_count() or 1) + 4)}"
    print(f"{args.app}: {args.queries} queries gathered (default executor: {threads} threads), "
          f"medians over {args.rounds - 1} rounds")
    base = statistics.median(times[systems[0]])
    for name in systems:
        median = statistics.median(times[name])
        same = answers[name] == answers[systems[0]]
        print(f"  {name:13s} {median:6.3f} s  {base / median:5.2f}x {systems[0]}  CPU {statistics.median(cpu[name]):5.2f} s"
              f"  answers {'equal' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
