"""`accel bench <example>`: the example app run stock, hand-parallelised and through accel on
the same engines, data and query order; prints a table, writes JSON and PNG plots.

The engines are the `accel up` stack (started here when it is not running) or whatever
ACCEL_OPENAI_BASE_URL / ACCEL_PG_DSN point at.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markdown import Markdown


@contextmanager
def _engines(console: Console, private_size: str) -> Iterator[Any]:
    """The examples' StackConfig: a private stack, or the `accel up` one (started if needed)."""
    from accel.examples.stack import StackConfig

    if private_size:
        from accel.benchmarks.private_stack import private_stack

        console.print(f"starting a private stack ({private_size} LLM, about 2 minutes)")
        with private_stack(private_size) as config:
            yield config
        return
    from accel.engines import stack

    with console.status("engines") as status:
        info = asyncio.run(stack.up(report=lambda msg: status.update(msg)))
    yield StackConfig(info.openai_base_url, info.model, info.pg_dsn, info.embed_model, info.rerank_model)


def _command(name: str) -> Callable[..., None]:
    def run(
        framework: str = typer.Option("langchain", help="langchain | llamaindex"),
        mode: str = typer.Option("single", help="single | batch | poisson"),
        rate: list[float] = typer.Option([], help="Poisson request rate in queries/s (repeat for a sweep)."),
        queries: int = typer.Option(8, help="Number of workload questions."),
        json_path: Path | None = typer.Option(None, "--json", help="Write the report as JSON here."),
        plot: Path | None = typer.Option(None, help="Write PNG plots here (Poisson adds <stem>-rates.png)."),
        markdown_path: Path | None = typer.Option(None, "--markdown", help="Write the markdown table here."),
        systems: str = typer.Option("", help="Comma-separated systems to run (default: all)."),
        ablations: bool = typer.Option(True, help="Also run accel with each pass switched off."),
        concurrency: int = typer.Option(16, help="Concurrent queries for the concurrent systems."),
        seed: int = typer.Option(0, help="Workload seed (questions, arrivals)."),
        private_stack: str = typer.Option("", help="Run on a private stack with this offline LLM (tiny | bench) "
                                                   "instead of `accel up`: clean prefix cache, reset between systems."),
    ) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        from accel.benchmarks import plots, report as reports
        from accel.benchmarks.harness import BenchConfig, compare

        console = Console()
        config = BenchConfig(
            name, framework, mode, queries=queries, rates=tuple(rate),  # type: ignore[arg-type]
            systems=tuple(s for s in systems.split(",") if s), ablations=ablations, concurrency=concurrency, seed=seed,
        )
        config.check()
        with _engines(console, private_stack) as stack, Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as progress:
            task = progress.add_task(f"{name} · {framework} · {mode}", total=None)
            result = compare(config, stack, progress=lambda msg: progress.update(task, description=f"{name} · {framework} · {mode}: {msg}"))
        text = reports.markdown(result)
        console.print(Markdown(text))
        if json_path is not None:
            console.print(f"wrote {reports.write_json(result, json_path)}")
        if markdown_path is not None:
            markdown_path.parent.mkdir(parents=True, exist_ok=True)
            markdown_path.write_text(text)
        for path in plots.plot(result, plot or (json_path.with_suffix(".png") if json_path else Path(f"bench-{name}.png"))):
            console.print(f"wrote {path}")

    run.__doc__ = f"Compare the {name} example: stock, LlamaDistPC-like and accel (policies, ablations)."
    return run


def register(app: typer.Typer) -> None:
    """One subcommand per example the harness knows."""
    from accel.benchmarks.apps import EXAMPLES

    for name in EXAMPLES:
        app.command(name)(_command(name))
