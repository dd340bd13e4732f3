"""`accel profile`: throughput vs batch size of every engine and the max efficient batch sizes
the runtime will use (saved under <ACCEL_HOME>/profiles/)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from . import quiet
from .stack import JSON_FLAG, print_json

console = Console(stderr=True)
out = Console()

ENGINES = ("embed", "rerank", "vectordb", "llm", "embed-server", "rerank-server")
"""`embed-server` / `rerank-server`: the encoder servers the stack records (`accel up --encoders
server`, ACCEL_EMBED_BASE_URL / ACCEL_RERANK_BASE_URL); skipped, with a note, without one."""


def profile(
    engines: list[str] = typer.Option(list(ENGINES), "--engine", help="Engines to profile."),
    as_json: bool = JSON_FLAG,
    markdown: Path | None = typer.Option(None, "--markdown", help="Also write a markdown report here."),
    repeats: int = typer.Option(3, help="Timed runs per batch size (the fastest is kept)."),
    verbose: bool = quiet.VERBOSE,
) -> None:
    """Measure each engine's throughput vs batch size and choose its max efficient batch."""
    quiet.configure(verbose)
    unknown = set(engines) - set(ENGINES)
    if unknown:
        raise typer.BadParameter(f"unknown engines {sorted(unknown)}; choose from {ENGINES}")
    with Progress(console=console) as progress:
        report = asyncio.run(_profile_all(engines, repeats, progress))
    if as_json:
        print_json(report)
    else:
        out.print(_table(report))
        if "llm_sequential_vs_batched" in report:
            cmp = report["llm_sequential_vs_batched"]
            out.print(f"LLM: {cmp['n']} requests one after another {cmp['sequential_s']:.2f} s, "
                      f"submitted together {cmp['batched_s']:.2f} s -> {cmp['ratio']:.1f}x")
    if markdown is not None:
        markdown.write_text(_markdown(report))
        console.print(f"wrote {markdown}")


async def _profile_all(engines: list[str], repeats: int, progress: Progress) -> dict:
    from accel.engines.profile import chunk_texts, profile_engine, query_texts

    profiles = []
    report: dict = {"profiles": profiles}
    if "embed" in engines:
        from accel.engines.embeddings import SentenceTransformerEmbedder

        async with SentenceTransformerEmbedder(max_batch=128) as embedder:
            for label, make in (("query", query_texts), ("chunk", chunk_texts)):
                profiles.append(await profile_engine(embedder, make, label=label, repeats=repeats, progress=progress))
    if "rerank" in engines:
        from accel.engines.reranker import CrossEncoderReranker

        async with CrossEncoderReranker(max_batch=128) as reranker:
            def pairs(n: int) -> list[tuple[str, str]]:
                return list(zip(query_texts(n), chunk_texts(n), strict=True))

            profiles.append(await profile_engine(reranker, pairs, label="pairs", repeats=repeats, progress=progress))
    if "embed-server" in engines or "rerank-server" in engines:
        profiles += await _profile_servers(engines, repeats, progress)
    if "vectordb" in engines:
        profiles.append(await _profile_vectordb(repeats, progress))
    if "llm" in engines:
        llm_profile, comparison = await _profile_llm(repeats, progress)
        profiles.append(llm_profile)
        report["llm_sequential_vs_batched"] = comparison
    for p in profiles:
        p.save()
    report["profiles"] = [_profile_json(p) for p in profiles]
    return report


def _profile_json(p) -> dict:
    return {
        "engine": p.engine,
        "label": p.label,
        "max_efficient_batch": p.max_efficient_batch,
        "speedup_vs_batch_1": p.speedup,
        "points": [{"batch_size": q.batch_size, "throughput": q.throughput, "latency_s": q.latency_s} for q in p.points],
    }


async def _profile_servers(engines: list[str], repeats: int, progress: Progress) -> list:
    """The stack's encoder servers, measured as the in-process encoders are (one request per
    batch); their engines are then sized from these profiles like the in-process ones."""
    from accel.config import settings
    from accel.engines.profile import profile_server_encoders
    from accel.engines.stack import read_state

    state, cfg = read_state(), settings()
    embed_url = (getattr(state, "embed_base_url", None) or cfg.embed_base_url) if "embed-server" in engines else None
    rerank_url = (getattr(state, "rerank_base_url", None) or cfg.rerank_base_url) if "rerank-server" in engines else None
    rerank_model = getattr(state, "rerank_model_name", None) if rerank_url else None
    if rerank_url and not rerank_model:
        from accel.engines.encoder_servers import served_model

        rerank_model = await asyncio.to_thread(served_model, rerank_url)
    for name, url in (("embed-server", embed_url), ("rerank-server", rerank_url)):
        if name in engines and not url:
            console.print(f"{name}: no server recorded (`accel up --encoders server` or ACCEL_{name.split('-')[0].upper()}"
                          "_BASE_URL); skipped")
    return await profile_server_encoders(embed_url, rerank_url, rerank_model, repeats=repeats, save=False,
                                         progress=progress)


async def _profile_vectordb(repeats: int, progress: Progress):
    """Nearest-neighbour search of n query vectors in one round trip over 5,000 stored rows."""
    import numpy as np

    from accel.engines.base import VectorQuery
    from accel.engines.profile import profile_engine
    from accel.engines.stack import read_state
    from accel.engines.vectordb import PgVectorEngine, Row, resolve_dsn

    state = read_state()
    dsn = state.pg_dsn if state else resolve_dsn(start=True)
    rng = np.random.default_rng(0)
    collection = "accel_profile"
    async with PgVectorEngine(dsn) as db:
        await db.drop_collection(collection)
        await db.create_collection(collection, dim=384, metric="cosine")
        vectors = rng.standard_normal((5000, 384)).astype("float32")
        await db.ingest(collection, [Row(str(i), f"row {i}", v, {}) for i, v in enumerate(vectors)])

        def queries(n: int) -> list[VectorQuery]:
            return [VectorQuery(v, k=8, collection=collection) for v in rng.standard_normal((n, 384))]

        try:
            return await profile_engine(db, queries, label="search-k8-5000rows", repeats=repeats, progress=progress)
        finally:
            await db.drop_collection(collection)


async def _profile_llm(repeats: int, progress: Progress):
    """Concurrent generations of ~350 prompt tokens and 32 output tokens. Every prompt is new
    (a counter leads it) so vLLM's prefix cache cannot flatter larger batches."""
    from accel.config import settings
    from accel.engines.base import GenerationRequest, SamplingParams
    from accel.engines.profile import chunk_texts, profile_engine
    from accel.engines.stack import read_state

    counter = itertools.count()
    body = " ".join(chunk_texts(2))
    params = SamplingParams(max_tokens=32, temperature=0.0, extra={"ignore_eos": True})

    def requests(n: int) -> list[GenerationRequest]:
        return [GenerationRequest(prompt=f"Request {next(counter)}. {body}", params=params) for _ in range(n)]

    state = read_state()
    if state is not None:
        from accel.engines.llm import OpenAIServerEngine

        engine = OpenAIServerEngine(state.openai_base_url, state.model)
    else:
        from accel.engines.llm import VLLMEngine
        from accel.engines.offline.llm import resolve_llm

        cfg = settings()
        engine = VLLMEngine(resolve_llm(cfg.llm_model, size=cfg.llm_size))
    async with engine:
        profile = await profile_engine(engine, requests, (1, 2, 4, 8, 16, 32), label="prompt350-out32",
                                       repeats=repeats, progress=progress, fresh=True)
        n = 16
        task = progress.add_task(f"{engine.name}: {n} one after another vs together", total=2 * repeats)
        loop = asyncio.get_running_loop()
        sequential, batched = [], []
        for _ in range(repeats):  # the fastest of `repeats`, as for the sweep above
            began = loop.time()
            for request in requests(n):
                await engine.run([request])
            sequential.append(loop.time() - began)
            progress.advance(task)
            began = loop.time()
            await engine.run(requests(n))
            batched.append(loop.time() - began)
            progress.advance(task)
        sequential, batched = min(sequential), min(batched)
    comparison = {"n": n, "sequential_s": sequential, "batched_s": batched, "ratio": sequential / batched}
    return profile, comparison


def _table(report: dict) -> Table:
    table = Table("engine", "input", "batch", "items/s", "latency s", "max efficient", "speedup vs 1")
    for p in report["profiles"]:
        for q in p["points"]:
            mark = q["batch_size"] == p["max_efficient_batch"]
            table.add_row(p["engine"], p["label"], str(q["batch_size"]), f"{q['throughput']:.1f}",
                          f"{q['latency_s']:.3f}", "*" if mark else "", f"{p['speedup_vs_batch_1']:.1f}x" if mark else "")
    return table


def _markdown(report: dict) -> str:
    lines = ["| engine | input | batch | items/s | latency s | max efficient |", "|---|---|---|---|---|---|"]
    for p in report["profiles"]:
        for q in p["points"]:
            mark = f"**yes** ({p['speedup_vs_batch_1']:.1f}x vs 1)" if q["batch_size"] == p["max_efficient_batch"] else ""
            lines.append(f"| {p['engine']} | {p['label']} | {q['batch_size']} | {q['throughput']:.1f} | "
                         f"{q['latency_s']:.3f} | {mark} |")
    if "llm_sequential_vs_batched" in report:
        c = report["llm_sequential_vs_batched"]
        lines.append("")
        lines.append(f"LLM: {c['n']} requests one after another took {c['sequential_s']:.2f} s; submitted "
                     f"together {c['batched_s']:.2f} s: **{c['ratio']:.1f}x**.")
    return "\n".join(lines) + "\n"
