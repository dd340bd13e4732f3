"""What accel costs on chains it cannot lower: per-call time of stock vs `accel.wrap` vs
`ACCEL_AUTO` (the patched entry points) on the fake-model chains of langchain-core's own tests.

    .venv/bin/python -m accel.benchmarks.overhead [--calls 2000] [--json out.json]

Calls are interleaved (stock, wrapped, auto, stock, ...) in rounds so that machine noise hits
every system alike; each figure is the median over rounds of the mean per-call CPU time of this
process (`time.process_time`: the work a call costs, which other processes loading the machine
do not inflate as they inflate wall time). The goal (issue 16) is at most 1.10x of stock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any


def chains() -> dict[str, Any]:
    """Chains accel cannot lower, as langchain-core's runnables tests build them."""
    from langchain_core.language_models.fake import FakeListLLM
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

    chat = FakeListChatModel(responses=["foo, bar"] * 10)
    llm = FakeListLLM(responses=["baz"] * 10)
    prompt = ChatPromptTemplate.from_messages([("system", "You are a nice assistant."), ("human", "{question}")])
    return {
        "prompt|chat|parser": prompt | chat | StrOutputParser(),
        "lambda|prompt|llm": RunnableLambda(lambda q: {"question": q}) | PromptTemplate.from_template("Q: {question}") | llm,
        "parallel|prompt|chat": RunnableParallel(question=RunnablePassthrough(), upper=RunnableLambda(str.upper))
        | ChatPromptTemplate.from_template("{question} {upper}") | chat | StrOutputParser(),
    }


def _mean_call(fn: Callable[[], Any], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls


async def _amean_call(fn: Callable[[], Any], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        await fn()
    return (time.process_time() - start) / calls


def measure(calls: int, rounds: int) -> dict[str, Any]:
    import accel
    from accel.patches.langchain import _PATCH

    results: dict[str, Any] = {}
    for name, chain in chains().items():
        wrapped = accel.wrap(chain)
        systems = {"stock": chain, "accel.wrap": wrapped}
        per: dict[str, dict[str, list[float]]] = {m: {s: [] for s in (*systems, "ACCEL_AUTO")} for m in ("invoke", "ainvoke", "stream")}
        for _ in range(rounds):
            for system in (*systems, "ACCEL_AUTO"):
                auto = system == "ACCEL_AUTO"
                target = chain if auto else systems[system]
                if auto:
                    _PATCH.patch()
                try:
                    per["invoke"][system].append(_mean_call(lambda: target.invoke("hi"), calls))
                    per["ainvoke"][system].append(asyncio.run(_amean_call(lambda: target.ainvoke("hi"), calls)))
                    per["stream"][system].append(_mean_call(lambda: list(target.stream("hi")), calls))
                finally:
                    if auto:
                        _PATCH.unpatch()
        results[name] = {
            method: {system: statistics.median(times) * 1e6 for system, times in by_system.items()}
            for method, by_system in per.items()
        }
    return results


def report(results: dict[str, Any]) -> str:
    lines = [f"{'chain':24} {'entry':8} {'stock us':>9} {'wrap us':>9} {'auto us':>9} {'wrap/stock':>10} {'auto/stock':>10}",
             "(CPU microseconds per call, median of rounds)"]
    worst = 0.0
    for name, methods in results.items():
        for method, us in methods.items():
            wrap, auto = us["accel.wrap"] / us["stock"], us["ACCEL_AUTO"] / us["stock"]
            worst = max(worst, wrap, auto)
            lines.append(f"{name:24} {method:8} {us['stock']:9.1f} {us['accel.wrap']:9.1f} {us['ACCEL_AUTO']:9.1f} {wrap:9.3f}x {auto:9.3f}x")
    lines.insert(0, f"worst overhead on chains accel cannot lower: {worst:.3f}x of stock (goal <= 1.10x)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per system per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", help="write the per-call microseconds here")
    args = parser.parse_args()
    results = measure(args.calls, args.rounds)
    print(report(results))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
