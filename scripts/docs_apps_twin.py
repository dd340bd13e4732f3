"""Apps written from the frameworks' docs (tests/external/apps, transcribed for the fidelity
suites, never tuned for accel) on the engine twins: a batch of N questions, stock and
`accel.wrap`, answers compared. LangChain and LangGraph apps take it through their own
`batch(..., max_concurrency=N)`; LlamaIndex query engines, which have none, as `aquery`s gathered
on one event loop (an async server's way, and the goals').

The goals run the repository's examples, which accel was built beside; this asks whether what
accel gains on GPU economics carries to apps it was not designed for. Every figure it prints is
**simulated from measured H100 curves** when the stack is `accel up --twin h100-8b`.

    ACCEL_HOME=<twin home> .venv/bin/python scripts/docs_apps_twin.py [--queries 32] [--rounds 4] \\
        [--max-tokens 64] [--apps lg_rag_part1,...] [--json out.json]

Per app: one warm-up batch each, then `--rounds` rounds, the systems alternating (the first
system rotating), each batch on a settled heap with the LLM's prefix cache emptied before it
(no system reuses another's prompts). Figures are medians over the rounds. `alone`: each
system's median latency of single queries (the batch's first 4, once each, after the batches,
without the batch's `max_concurrency`, which LangGraph also applies to a run's own tasks): what
one query takes on an idle stack. `LLM busy`: the LLM twin's modelled busy time over the batch
(`/metrics`), its share of the batch, and the steps it ran; near 100%, the engine had no idle
time to give and only less engine work (fuller steps, fewer of them) shortens the batch.

A diagnosis script beside the goals (it imports the test apps, so it lives in the repository,
not the package), not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the docs apps: `tests.external.apps.<name>` (namespace packages)


MODULES = ("heapq", "bisect", "functools", "json", "textwrap")
"""The pydoc pages every app indexes (the goals' questions are asked of them)."""


@dataclass
class Stack:
    """What the apps are built over: the running stack's config, LangChain's store (PGVector
    over the embedding server) and chat model, and the pages as files for LlamaIndex's readers
    (whose `Settings` name the same servers)."""

    config: Any
    store: Any
    llm: Any
    files: list[str]
    loop: asyncio.Runner
    """One event loop for every gathered batch, as an async server has: LlamaIndex's OpenAI
    clients keep the async HTTP client of the loop they first ran on (a fresh `asyncio.run` per
    batch ends in `APIConnectionError` on the second)."""


@dataclass
class App:
    """A docs app built over the stack, how a batch of questions becomes its inputs, and whether
    it is a LangChain runnable (`batch`) or a LlamaIndex query engine (`aquery`s gathered)."""

    name: str
    what: str
    build: Callable[[Stack], Any]
    inputs: Callable[[list[str]], list[Any]] = list
    configs: Callable[[int], list[dict[str, Any]] | None] = lambda n: None
    llamaindex: bool = False


ALONE = 4
"""Questions timed alone per system (the first of the batch's), after the batches."""


def _question(qs: list[str]) -> list[Any]:
    return [{"question": q} for q in qs]


def _input(qs: list[str]) -> list[Any]:
    return [{"input": q} for q in qs]


def _threads(n: int) -> list[dict[str, Any]]:
    tag = uuid.uuid4().hex[:8]
    return [{"configurable": {"thread_id": f"{tag}-{i}"}} for i in range(n)]


def apps() -> list[App]:
    from tests.external.apps import (li_query_engine_usage, li_simple_fusion, li_starter, li_sub_question, lc_multi_query,
                                     lc_qa_sources, lc_rag_builtin_chains, lc_rag_custom_prompt, lc_rag_tutorial,
                                     lg_lcel_nodes, lg_map_reduce, lg_rag_part1, lg_rag_part2)

    def starter_index(s: Stack) -> Any:
        return li_starter.build(str(Path(s.files[0]).parent))[0]

    half = len(MODULES) // 2
    return [
        App("lc_rag_tutorial", "LangChain RAG tutorial (LCEL: retriever | format_docs, prompt, llm, parser)",
            lambda s: lc_rag_tutorial.build(s.store, s.llm)),
        App("lc_rag_custom_prompt", "LangChain RAG with a custom prompt",
            lambda s: lc_rag_custom_prompt.build(s.store.as_retriever(), s.llm)),
        App("lc_rag_builtin_chains", "create_retrieval_chain + create_stuff_documents_chain",
            lambda s: lc_rag_builtin_chains.build(s.store.as_retriever(), s.llm), _input),
        App("lc_qa_sources", "RAG returning its sources (RunnablePassthrough.assign)",
            lambda s: lc_qa_sources.build(s.store.as_retriever(), s.llm), _input),
        App("lc_multi_query", "MultiQueryRetriever (an LLM writes 3 queries, 3 searches, union)",
            lambda s: lc_multi_query.build(s.store, s.config.openai_base_url, s.config.model, max_tokens=s.llm.max_tokens)),
        App("lg_rag_part1", "LangGraph RAG part 1 (retrieve -> generate, sync nodes)",
            lambda s: lg_rag_part1.build(s.store, s.llm), _question),
        App("lg_rag_part1_query_analysis", "LangGraph RAG part 1 with query analysis (3 nodes, 2 LLM calls)",
            lambda s: lg_rag_part1.build_with_query_analysis(s.store, s.llm), _question),
        App("lg_lcel_nodes", "LangGraph with LCEL chains as nodes (analyze, retrieve, generate)",
            lambda s: lg_lcel_nodes.build(s.store, s.llm), _question),
        App("lg_map_reduce", "LangGraph map-reduce with Send (topics, a joke per subject, the best)",
            lambda s: lg_map_reduce.build(s.llm), lambda qs: [{"topic": q} for q in qs]),
        App("lg_rag_part2", "LangGraph conversational RAG part 2 (ToolNode, MemorySaver), first turn",
            lambda s: lg_rag_part2.build(s.store, s.llm),
            lambda qs: [{"messages": [{"role": "user", "content": q}]} for q in qs], _threads),
        App("li_starter", "LlamaIndex starter: VectorStoreIndex.as_query_engine() (compact)",
            lambda s: starter_index(s).as_query_engine(), llamaindex=True),
        App("li_tree_summarize", "LlamaIndex query engine, response_mode='tree_summarize'",
            lambda s: li_query_engine_usage.high_level(starter_index(s)), llamaindex=True),
        App("li_low_level", "LlamaIndex low-level composition (VectorIndexRetriever, tree_summarize synthesizer)",
            lambda s: li_query_engine_usage.low_level(starter_index(s)), llamaindex=True),
        App("li_sub_question", "LlamaIndex SubQuestionQueryEngine over two indexes (fixed sub-questions)",
            lambda s: li_sub_question.build(s.files, fixed_questions=True), llamaindex=True),
        App("li_simple_fusion", "LlamaIndex QueryFusionRetriever (4 queries over two indexes)",
            lambda s: li_simple_fusion.build(s.files[:half], s.files[half:]), llamaindex=True),
    ]


def plain(value: Any) -> Any:
    """Run-independent outputs: messages as (type, content), documents as (text, metadata)."""
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage

    if isinstance(value, BaseMessage):
        return (value.type, value.content)
    if isinstance(value, Document):
        return (value.page_content, value.metadata)
    if hasattr(value, "source_nodes") and hasattr(value, "response"):  # a LlamaIndex Response
        return (str(value), [(n.node.get_content(), n.score) for n in value.source_nodes])
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@dataclass
class Batch:
    seconds: float
    outputs: list[Any]
    llm_busy_s: float | None  # the LLM twin's modelled busy time over the batch
    llm_steps: float | None
    embed_busy_s: float | None  # the embedding twin's


def timed_batch(app: Any, spec: App, questions: list[str], stack: Stack, *, batch: bool = True) -> Batch:
    from accel.benchmarks import twin_run
    from accel.benchmarks.harness import reset_prefix_cache
    from accel.benchmarks.runner import settled_heap

    inputs, configs = spec.inputs(questions), spec.configs(len(questions))
    limit = {"max_concurrency": len(inputs)} if batch else {}  # one query alone: its own tasks as stock runs them
    config: Any = [{**c, **limit} for c in configs] if configs else limit
    reset_prefix_cache(stack.config.openai_base_url)
    before = twin_run.read(stack.config)
    with settled_heap():
        start = time.perf_counter()
        if spec.llamaindex:  # LlamaIndex has no batch: an async server's gathered `aquery`s, as the goals drive it
            outputs = stack.loop.run(_gathered(app, inputs))
        else:
            outputs = app.batch(inputs, config=config)
        seconds = time.perf_counter() - start
    busy = twin_run.read(stack.config).busy_since(before) or {}
    return Batch(seconds, outputs, busy.get("llm"), busy.get("llm_steps"), busy.get("embed"))


async def _gathered(engine: Any, questions: list[str]) -> list[Any]:
    return list(await asyncio.gather(*(engine.aquery(q) for q in questions)))


def measure(spec: App, stack: Stack, questions: list[str], rounds: int, options: dict[str, Any]) -> dict[str, Any]:
    import accel

    stock = spec.build(stack)
    systems = {"stock": stock, "accel": accel.wrap(stock, **options)}
    batches: dict[str, list[Batch]] = {name: [] for name in systems}
    for name, app in systems.items():  # warm-up: imports, plans, connection pools
        timed_batch(app, spec, questions[:4], stack)
    equal = 0
    for r in range(rounds):
        order = list(systems) if r % 2 == 0 else list(systems)[::-1]
        for name in order:
            batches[name].append(timed_batch(systems[name], spec, questions, stack))
        equal += plain(batches["stock"][-1].outputs) == plain(batches["accel"][-1].outputs)
    alone: dict[str, list[float]] = {name: [] for name in systems}
    for q in questions[:ALONE]:
        for name, app in systems.items():
            alone[name].append(timed_batch(app, spec, [q], stack, batch=False).seconds)
    row: dict[str, Any] = {"app": spec.name, "what": spec.what, "rounds_equal": equal, "rounds": rounds}
    for name, runs in batches.items():
        seconds = [b.seconds for b in runs]
        busy = [b.llm_busy_s for b in runs if b.llm_busy_s is not None]
        steps = [b.llm_steps for b in runs if b.llm_steps is not None]
        embed = [b.embed_busy_s for b in runs if b.embed_busy_s is not None]
        row[name] = {"s": statistics.median(seconds), "range": [min(seconds), max(seconds)],
                     "alone_s": statistics.median(alone[name]),
                     "llm_busy_s": statistics.median(busy) if busy else None,
                     "llm_steps": statistics.median(steps) if steps else None,
                     "embed_busy_s": statistics.median(embed) if embed else None}
    row["speedup"] = row["stock"]["s"] / row["accel"]["s"]
    return row


def _busy(system: dict[str, Any]) -> str:
    if system["llm_busy_s"] is None:
        return "n/a"
    return f"{system['llm_busy_s']:.2f} ({system['llm_busy_s'] / system['s']:.0%}), {system['llm_steps']:.0f}"


def main(argv: list[str] | None = None, config: Any = None) -> None:
    """The command line (`argv`, default `sys.argv[1:]`) on the stack `accel up` left under
    `ACCEL_HOME`, or on `config` (a `StackConfig`) where given."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--apps", default="", help="comma-separated app names (default: all)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--wrap-options", type=json.loads, default={},
                        help='accel.wrap options as JSON, e.g. \'{"disabled_passes": ["learned_prefill"]}\'')
    args = parser.parse_args(argv)

    from rich.progress import Progress

    from accel.benchmarks.host_speed import describe, probe
    from accel.benchmarks.workload import build_workload
    from llama_index.core import Settings

    from accel.examples.corpus import pydoc_documents
    from accel.examples.langchain.models import build_index, chat_model
    from accel.examples.llamaindex.models import embed_model
    from accel.examples.stack import load_config
    from tests.external.apps.li_starter import local_llm

    from accel.benchmarks import twin_run

    config = config or load_config()
    on_twins = bool(twin_run.read(config).busy_by_twin)
    pages = pydoc_documents(MODULES)
    folder = Path(tempfile.mkdtemp(prefix="docs-apps-"))
    for page in pages:
        (folder / f"{page['metadata']['module']}.txt").write_text(page["text"])
    Settings.embed_model = embed_model(config)  # the starter's `configure`, on the stack's servers
    Settings.llm = local_llm(config.openai_base_url, config.model, max_tokens=args.max_tokens)
    questions = build_workload(args.queries).questions
    chosen = [a for a in apps() if not args.apps or a.name in args.apps.split(",")]
    before = probe()
    rows = []
    with asyncio.Runner() as loop, Progress(transient=True) as progress:
        stack = Stack(config, build_index(config, pages, "docs_apps_twin"), chat_model(config, max_tokens=args.max_tokens),
                      sorted(str(p) for p in folder.iterdir()), loop)
        task = progress.add_task("docs apps", total=len(chosen))
        for spec in chosen:
            progress.update(task, description=spec.name)
            rows.append(measure(spec, stack, questions, args.rounds, args.wrap_options))
            progress.advance(task)
    after = probe()
    host = f"{describe(before)} before, {describe(after)} after"
    wrapped = f"accel.wrap(app, **{args.wrap_options})" if args.wrap_options else "accel.wrap(app)"
    print("engine twins: every figure is simulated from measured H100 curves" if on_twins else "real engines")
    print(f"{args.queries} questions a batch, max_tokens {args.max_tokens}, {args.rounds} rounds, {wrapped}; {host}")
    print("LLM busy: the LLM twin's modelled busy seconds over the batch (share of it), its steps")
    print(f"{'app':<28} {'stock s':>7} {'accel s':>7} {'speed-up':>8} {'alone s, stock / accel':>22} "
          f"{'LLM busy, stock':>20} {'LLM busy, accel':>20} {'equal':>5}")
    for row in rows:
        alone = f"{row['stock']['alone_s']:.2f} / {row['accel']['alone_s']:.2f}"
        print(f"{row['app']:<28} {row['stock']['s']:>7.2f} {row['accel']['s']:>7.2f} {row['speedup']:>7.2f}x "
              f"{alone:>22} {_busy(row['stock']):>20} {_busy(row['accel']):>20} {row['rounds_equal']:>2}/{row['rounds']}")
    if args.json:
        args.json.write_text(json.dumps({"simulated": on_twins, "queries": args.queries, "max_tokens": args.max_tokens, "rounds": args.rounds,
                                         "host": {"before": before, "after": after}, "apps": rows}, indent=1))


if __name__ == "__main__":
    main()
