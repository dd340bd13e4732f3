"""`accel bench scheduler`: the runtime's own overhead, measured on zero-latency fake engines.

With engines that take no time, everything measured is the scheduler: how long dispatching one
primitive costs, how long binding a query to a cached template takes, and whether memory stays
flat across 1,000 concurrent queries (values are freed, nothing accumulates per query).
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from accel.ir import CallOp, DecodeOp, GatherOp, GraphBuilder, ItemsOp, Kind, Template
from accel.runtime import EngineLimits, Runtime
from accel.testing.fakes import FakeEngine, FakeLLMEngine

bench_app = typer.Typer(help="Measure accel's own overhead.", no_args_is_help=True)



@bench_app.callback()
def _group() -> None:
    """Benchmarks of accel itself (a group, so each measurement is its own subcommand)."""


GOALS = {"dispatch_us_per_primitive": 100.0, "instantiate_ms": 1.0}


def _join(hits: list[Any]) -> str:
    return " ".join(map(str, hits))


def _shout(text: str) -> str:
    return text.upper()


def bench_template(branches: int = 8) -> Template:
    """Input, `branches` RAG-like chains of 6 primitives (Embed, Search, Rerank, Call, Decode,
    Call), and an Output gathering them: 50 nodes for 8 branches."""
    b = GraphBuilder()
    x = b.input("x")
    tails = {}
    for k in range(branches):
        s = b.scope(f"b{k}")
        vecs = s.add(Kind.EMBED, "embed", engine="embed", inputs={"x": x}, op=ItemsOp("x"))
        hits = s.add(Kind.SEARCH, "search", engine="search", inputs={"v": vecs}, op=ItemsOp("v"))
        ranked = s.add(Kind.RERANK, "rerank", engine="rerank", inputs={"h": hits}, op=ItemsOp("h"))
        prompt = s.add(Kind.CALL, "prompt", inputs={"hits": ranked}, op=CallOp(_join, blocking=False))
        text = s.add(Kind.DECODE, "decode", engine="llm", inputs={"prompt": prompt}, op=DecodeOp())
        tails[f"p{k}"] = s.add(Kind.CALL, "post", inputs={"text": text}, op=CallOp(_shout, blocking=False))
    b.add(Kind.OUTPUT, "output", inputs=tails, op=GatherOp("list"))
    return Template.from_graph(b.graph)


def fake_engines() -> dict[str, Any]:
    """Zero-latency fakes that keep no history (so memory measures the runtime only)."""
    return {
        "embed": FakeEngine("embed", record=False),
        "search": FakeEngine("search", record=False),
        "rerank": FakeEngine("rerank", record=False),
        "llm": FakeLLMEngine(record=False),
    }


def measure_instantiate(template: Template, repeats: int = 2000) -> float:
    """Mean milliseconds to bind inputs to a cached template."""
    start = time.perf_counter()
    for i in range(repeats):
        template.instantiate({"x": ["question"]}, f"q{i}")
    return (time.perf_counter() - start) / repeats * 1e3


async def _run_queries(rt: Runtime, template: Template, n: int, concurrent: bool) -> float:
    start = time.perf_counter()
    if concurrent:
        async with asyncio.TaskGroup() as group:
            for i in range(n):
                group.create_task(rt.run(template, {"x": [f"question {i}"]}))
    else:
        for i in range(n):
            await rt.run(template, {"x": [f"question {i}"]})
    return time.perf_counter() - start


async def measure_dispatch(template: Template, queries: int, concurrent: bool) -> float:
    """Microseconds of runtime time per primitive executed (engines take zero time)."""
    limits = {name: EngineLimits(max_batch_size=64, max_inflight=256) for name in ("embed", "search", "rerank", "llm")}
    async with Runtime(fake_engines(), profiles=limits) as rt:
        await _run_queries(rt, template, 20, concurrent)  # warm caches and plans
        elapsed = await _run_queries(rt, template, queries, concurrent)
    return elapsed / (queries * (len(template) - 1)) * 1e6  # Input nodes are bindings, not work


async def measure_memory(template: Template, queries: int) -> dict[str, float]:
    """Traced Python memory before and after `queries` concurrent queries (after a warm-up
    round of the same size), and the growth per query."""
    limits = {name: EngineLimits(max_batch_size=64, max_inflight=256) for name in ("embed", "search", "rerank", "llm")}
    async with Runtime(fake_engines(), profiles=limits) as rt:
        await _run_queries(rt, template, queries, True)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            elapsed = await _run_queries(rt, template, queries, True)
            gc.collect()
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return {
        "queries": queries,
        "seconds_traced": elapsed,
        "memory_before_kib": before / 1024,
        "memory_after_kib": after / 1024,
        "memory_peak_kib": peak / 1024,
        "growth_bytes_per_query": (after - before) / queries,
    }


def run_benchmark(queries: int = 1000, dispatch_queries: int = 200, console: Console | None = None) -> dict[str, Any]:
    """All measurements, as a JSON-ready dict."""
    template = bench_template()
    report: dict[str, Any] = {"template_nodes": len(template)}
    with Progress(console=console, transient=True) as progress:
        step = progress.add_task("scheduler benchmark", total=4)
        report["instantiate_ms"] = measure_instantiate(template)
        progress.advance(step)
        report["dispatch_us_per_primitive"] = asyncio.run(measure_dispatch(template, dispatch_queries, concurrent=False))
        progress.advance(step)
        report["dispatch_us_per_primitive_concurrent"] = asyncio.run(measure_dispatch(template, dispatch_queries, concurrent=True))
        progress.advance(step)
        report["concurrent"] = asyncio.run(measure_memory(template, queries))
        progress.advance(step)
    report["goals"] = {k: {"goal": v, "met": report[k] < v} for k, v in GOALS.items()}
    return report


def _table(report: dict[str, Any]) -> Table:
    table = Table(title=f"accel scheduler overhead ({report['template_nodes']}-node template, zero-latency fakes)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("goal", justify="right")
    table.add_row("dispatch µs / primitive (one query at a time)", f"{report['dispatch_us_per_primitive']:.1f}", "< 100")
    table.add_row("dispatch µs / primitive (concurrent)", f"{report['dispatch_us_per_primitive_concurrent']:.1f}", "")
    table.add_row("instantiate ms", f"{report['instantiate_ms']:.4f}", "< 1")
    mem = report["concurrent"]
    table.add_row(f"{mem['queries']} concurrent queries: memory before KiB", f"{mem['memory_before_kib']:.0f}", "")
    table.add_row(f"{mem['queries']} concurrent queries: memory after KiB", f"{mem['memory_after_kib']:.0f}", "")
    table.add_row("memory growth bytes / query", f"{mem['growth_bytes_per_query']:.1f}", "≈ 0")
    return table


@bench_app.command("scheduler")
def scheduler(
    json_path: str | None = typer.Option(None, "--json", help="Write the measurements to this JSON file "
                                                              "('-': stdout, one document; the table goes to stderr)."),
    queries: int = typer.Option(1000, help="Concurrent queries for the memory measurement."),
) -> None:
    """Measure dispatch overhead, template instantiation and memory under concurrency."""
    to_stdout = json_path == "-"
    console = Console(stderr=to_stdout)
    report = run_benchmark(queries=queries, console=console)
    console.print(_table(report))
    if to_stdout:
        sys.stdout.write(json.dumps(report, separators=(",", ":")) + "\n")
    elif json_path is not None:
        path = Path(json_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2))
        console.print(f"wrote {path}")


def _mount_comparisons() -> None:
    """`accel bench <example>` (advanced-rag, ...): the comparison harness, when installed."""
    try:
        from .compare import register
    except ImportError:
        return
    register(bench_app)


_mount_comparisons()
