"""`accel profile`: throughput vs batch size of every engine and the max efficient batch sizes
the runtime will use (saved under <ACCEL_HOME>/profiles/)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
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
    max_batch: int = typer.Option(256, "--max-batch", min=1,
                                  help="Largest batch size swept (a quick look: smaller; 256 by default: the "
                                       "encoders' sweeps end at 128, the LLM's where a doubling gains under 10%)."),
    require_quiet: bool = typer.Option(
        False, "--require-quiet",
        help="Save nothing and exit 1 if another process took over half a core around any sweep."),
    verbose: bool = quiet.VERBOSE,
) -> None:
    """Measure each engine's throughput vs batch size and choose its max efficient batch.

    Other processes' CPU is measured around each sweep and saved with its profile: a profile
    measured beside other work reads slow, and accel sizes its calls from it."""
    quiet.configure(verbose)
    unknown = set(engines) - set(ENGINES)
    if unknown:
        raise typer.BadParameter(f"unknown engines {sorted(unknown)}; choose from {ENGINES}")
    with Progress(console=console) as progress:
        report = asyncio.run(_profile_all(engines, repeats, max_batch, progress, require_quiet))
    if as_json:
        print_json(report)
    else:
        out.print(_table(report))
        if "llm_sequential_vs_batched" in report:
            cmp = report["llm_sequential_vs_batched"]
            out.print(f"LLM: {cmp['n']} requests one after another {cmp['sequential_s']:.2f} s, "
                      f"submitted together {cmp['batched_s']:.2f} s -> {cmp['ratio']:.1f}x")
        for line in _prefill_lines(report):
            out.print(line)
    if markdown is not None:
        markdown.write_text(_markdown(report))
        console.print(f"wrote {markdown}")
    busy = [p for p in report["profiles"] if p["busy"]]
    for p in busy:
        console.print(f"[yellow]{p['engine']}/{p['label']}: measured while other processes used "
                      f"{p['busy_cores']:.1f} cores; its figures read slow[/yellow]")
    if busy:
        console.print("[yellow]Run `accel profile` again when nothing else runs on this machine"
                      + (" (nothing was saved: --require-quiet)" if require_quiet else "") + ".[/yellow]")
        if require_quiet:
            raise typer.Exit(1)


def swept(sizes: tuple[int, ...], max_batch: int) -> tuple[int, ...]:
    """The sweep's batch sizes up to `max_batch` (batch 1, the reference, always)."""
    return tuple(size for size in sizes if size <= max_batch) or (1,)


async def _profile_all(engines: list[str], repeats: int, max_batch: int, progress: Progress,
                       require_quiet: bool = False) -> dict:
    from accel.engines import profile_sweeps as sweeps
    from accel.engines.profile import DEFAULT_BATCH_SIZES

    sizes = swept(DEFAULT_BATCH_SIZES, max_batch)
    profiles = []
    report: dict = {"profiles": profiles}
    if "embed" in engines:
        profiles += await sweeps.profile_embedder(sizes, repeats=repeats, progress=progress)
    if "rerank" in engines:
        profiles.append(await sweeps.profile_reranker(sizes, repeats=repeats, progress=progress))
    if "embed-server" in engines or "rerank-server" in engines:
        profiles += await _profile_servers(engines, repeats, sizes, progress)
    if "vectordb" in engines:
        profiles.append(await sweeps.profile_vectordb(repeats=repeats, progress=progress))
    if "llm" in engines:
        llm_profile, comparison = await sweeps.profile_llm(swept(sweeps.LLM_BATCH_SIZES, max_batch), repeats=repeats,
                                                           progress=progress)
        profiles.append(llm_profile)
        report["llm_sequential_vs_batched"] = comparison
    if not (require_quiet and any(p.busy for p in profiles)):
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
        "measured_at": p.measured_at,
        "busy_cores": p.busy_cores,
        "busy": p.busy,
        "points": [{"batch_size": q.batch_size, "throughput": q.throughput, "latency_s": q.latency_s} for q in p.points],
        "prefill": None if p.prefill is None else {
            **asdict(p.prefill), "request_s": p.prefill.request_s, "token_s": p.prefill.token_s,
            "warm_min_tokens": p.prefill.warm_min_tokens},
    }


def _prefill_lines(report: dict) -> list[str]:
    """What a lone prompt costs each profiled LLM, and the shortest warm-up that pays."""
    lines = []
    for p in report["profiles"]:
        if (c := p.get("prefill")) is not None:
            lines.append(f"{p['engine']} prefill: {c['short_tokens']} prompt tokens {c['short_s'] * 1e3:.1f} ms, "
                         f"{c['long_tokens']} tokens {c['long_s'] * 1e3:.1f} ms -> {c['request_s'] * 1e3:.1f} ms a request "
                         f"+ {c['token_s'] * 1e6:.1f} us a token; warm-ups of fewer than {c['warm_min_tokens']} tokens "
                         "are not sent")
    return lines


async def _profile_servers(engines: list[str], repeats: int, sizes: tuple[int, ...], progress: Progress) -> list:
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
    return await profile_server_encoders(embed_url, rerank_url, rerank_model, sizes, repeats=repeats, save=False,
                                         progress=progress)


def _table(report: dict) -> Table:
    table = Table("engine", "input", "batch", "items/s", "latency s", "max efficient", "speedup vs 1",
                  "other CPU, cores")
    for p in report["profiles"]:
        for i, q in enumerate(p["points"]):
            mark = q["batch_size"] == p["max_efficient_batch"]
            other = "" if i or p["busy_cores"] is None else f"{p['busy_cores']:.1f}" + (" busy" if p["busy"] else "")
            table.add_row(p["engine"], p["label"], str(q["batch_size"]), f"{q['throughput']:.1f}",
                          f"{q['latency_s']:.3f}", "*" if mark else "", f"{p['speedup_vs_batch_1']:.1f}x" if mark else "",
                          other)
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
    if prefill := _prefill_lines(report):
        lines += ["", *prefill]
    return "\n".join(lines) + "\n"
