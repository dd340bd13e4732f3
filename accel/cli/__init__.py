"""The `accel` command line: the local stack, health checks, engine profiles, the demo."""

from __future__ import annotations

import typer

from . import models, profile, stack

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


def _mount_optional() -> None:
    try:
        from .bench import bench_app
    except ImportError:
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
