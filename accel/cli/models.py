"""`accel models`: build the offline models (no hub needed) so later commands start fast."""

from __future__ import annotations

import typer
from rich.console import Console

from accel.config import settings

from . import quiet

console = Console(stderr=True)


def models(
    sizes: list[str] = typer.Option(["tiny", "bench"], "--size", help="Offline LLM sizes to build."),
    verbose: bool = quiet.VERBOSE,
) -> None:
    """Build the offline LLMs (tiny for tests, bench for benchmarks) and the reranker."""
    quiet.configure(verbose)
    from accel.engines.offline.llm import build_llm
    from accel.engines.offline.reranker import build_reranker

    cfg = settings()
    with console.status("building offline models") as status:
        for size in sizes:
            status.update(f"offline LLM '{size}'")
            path = build_llm(size)  # type: ignore[arg-type]
            console.print(f"[green]ok[/] llm-{size}: {path}")
        status.update("offline reranker")
        console.print(f"[green]ok[/] reranker: {build_reranker()}")
    console.print(f"models are in {cfg.models_dir}")
