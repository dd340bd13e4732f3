"""The `accel` command line: the local stack, health checks, engine profiles, the demo."""

from __future__ import annotations

import typer

from . import graph, models, profile, stack

app = typer.Typer(
    help="accel: drop-in acceleration for LangChain and LlamaIndex apps",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command("models")(models.models)
app.command("up")(stack.up)
app.command("down")(stack.down)
app.command("doctor")(stack.doctor)
app.command("profile")(profile.profile)
app.command("demo")(stack.demo)
app.command("graph")(graph.graph)


def _mount_optional() -> None:
    """`accel bench` needs the benchmark harness and the framework extras; when they do not
    import, the command stays listed and says what is missing instead of vanishing."""
    try:
        from .bench import bench_app
    except ImportError as err:
        broken = err

        @app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
                     help=f"Benchmarks (unavailable: {broken}).")
        def bench_unavailable() -> None:
            typer.echo(f"accel bench: unavailable because an import failed: {broken!r}. "
                       "Remedy: install the extras (make setup, or pip install -e '.[langchain,llamaindex]').", err=True)
            raise typer.Exit(2)

        return
    app.add_typer(bench_app, name="bench", help="Benchmarks (scheduler overhead, comparisons).")


_mount_optional()


def main() -> None:
    import os
    import sys

    from accel.engines.errors import EngineError

    from . import quiet

    # vLLM logs to stdout by default; keep stdout for results (`--json` must stay parseable).
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    quiet.configure("--verbose" in sys.argv[1:])  # before any command imports tqdm or transformers

    try:
        app()
    except EngineError as exc:  # typed engine errors already say what broke and what to do
        typer.echo(f"accel: {exc}", err=True)
        raise SystemExit(1) from None
