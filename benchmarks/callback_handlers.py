"""What a LlamaIndex callback handler costs: the examples' advanced RAG (query fusion, rerank,
refine) answering a batch of queries, stock and `accel.wrap`, each without and with the token
counting handler of LlamaIndex's docs on its components, on the stack `accel up` started (the
engine twins with `accel up --twin h100-8b`).

    ACCEL_HOME=<home> .venv/bin/python -m accel.benchmarks.callback_handlers [--queries 32] [--rounds 6]

A batch is `asyncio.gather` over `aquery` on one loop (as the bench's stock-concurrent driver).
Systems alternate within each round (the order rotating), so machine noise hits each alike;
figures are medians over the rounds after the first (warm-up). Every round checks that the
counters read the same totals with stock and accel. Before accel fired callback events from its
lowered stages, a listening handler sent queries to the stock code: the gap between the two
accel rows is what a handler costs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

SYSTEMS = ("stock", "stock + counter", "accel", "accel + counter")


def _listen(app: Any, handler: Any | None) -> None:
    """Put `handler` (or none) on the callback manager of every component of `app`."""
    from llama_index.core.callbacks import CallbackManager

    from accel.adapters.llamaindex.callbacks import components

    for component in components(app):
        component.callback_manager = CallbackManager([handler] if handler is not None else [])


async def _batch(app: Any, questions: list[str]) -> list[Any]:
    return await asyncio.gather(*(app.aquery(q) for q in questions))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)

    from llama_index.core.callbacks import TokenCountingHandler

    import accel
    from accel.benchmarks.workload import build_workload
    from accel.examples.llamaindex.advanced_rag import build_app
    from accel.examples.llamaindex.models import build_index
    from accel.examples.stack import load_config

    config = load_config()
    workload = build_workload(args.queries)
    index = build_index(config, workload.documents, "callback_handlers")
    apps = {"stock": build_app(config, index), "accel": accel.wrap(build_app(config, index))}
    counter = TokenCountingHandler()
    loop = asyncio.new_event_loop()
    times: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    totals: dict[str, set[tuple[int, int]]] = {"stock + counter": set(), "accel + counter": set()}
    try:
        for round_ in range(args.rounds):
            for name in SYSTEMS[round_ % len(SYSTEMS):] + SYSTEMS[:round_ % len(SYSTEMS)]:
                app = apps[name.split(" ")[0]]
                _listen(app, counter if name.endswith("counter") else None)
                counter.reset_counts()
                start = time.perf_counter()
                loop.run_until_complete(_batch(app, workload.questions))
                if round_:
                    times[name].append(time.perf_counter() - start)
                if name in totals:
                    totals[name].add((counter.total_llm_token_count, counter.total_embedding_token_count))
    finally:
        loop.close()
    stock = statistics.median(times["stock"])
    print(f"{args.queries} queries a batch, medians over {args.rounds - 1} rounds")
    for name in SYSTEMS:
        median = statistics.median(times[name])
        print(f"  {name:16s} {median:6.3f} s  {stock / median:5.2f}x stock")
    same = totals["stock + counter"] == totals["accel + counter"]
    print(f"token counts (LLM, embedding) per batch: stock {sorted(totals['stock + counter'])}, "
          f"accel {sorted(totals['accel + counter'])}: {'equal' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
