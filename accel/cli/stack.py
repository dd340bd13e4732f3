"""`accel up`, `accel down`, `accel doctor` and `accel demo`."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from . import quiet
from .steps import Steps

console = Console(stderr=True)
out = Console()
JSON_FLAG = typer.Option(False, "--json", help="Print one compact JSON document on stdout (everything else on stderr).")


def print_json(document: Any) -> None:
    """One compact JSON document, one line, on stdout: what scripts read."""
    sys.stdout.write(json.dumps(document, separators=(",", ":"), default=str) + "\n")
    sys.stdout.flush()


def up(as_json: bool = JSON_FLAG, verbose: bool = quiet.VERBOSE,
       replicas: int = typer.Option(1, "--replicas", min=1, help="vLLM servers to start; with more than one, wrapped "
                                    "apps spread over them and run the embedder and reranker as Ray actors "
                                    "(needs the `ray` extra)."),
       encoders: str = typer.Option("inprocess", "--encoders", help="'inprocess' (default): apps embed and rerank "
                                    "in their own process; 'server': also start vLLM pooling servers for the "
                                    "embedder (/v1/embeddings) and the reranker (/score, /rerank), as GPU "
                                    "deployments serve them (ACCEL_EMBED_BASE_URL / ACCEL_RERANK_BASE_URL name "
                                    "running ones instead)."),
       twin: str | None = typer.Option(None, "--twin", help="Start engine twins instead of the engines (e.g. "
                                       "'h100-8b', docs/twins.md): simulated LLM, embedder and reranker servers "
                                       "timed from a measured profile; Postgres stays real.")) -> None:
    """Start the embedded local stack: Postgres + pgvector and a vLLM OpenAI server."""
    quiet.configure(verbose)
    from accel.engines import stack

    with Steps(console) as steps:
        if twin is not None:
            from accel.engines.twin.stack import up_twin

            info = asyncio.run(up_twin(twin, report=steps.step))
        else:
            info = asyncio.run(stack.up(report=steps.step, replicas=replicas, encoders=encoders))
    if as_json:
        print_json(info.shown())  # a DSN's password is never printed
        return
    table = Table(title="accel local stack", show_header=False)
    for key, value in info.shown().items():
        if value is not None:
            table.add_row(key, str(value))
    out.print(table)
    out.print(f"LangChain: ChatOpenAI(base_url='{info.openai_base_url}', model='{info.model}', api_key='EMPTY')")
    out.print(f"Postgres:  psycopg.connect('{info.shown()['pg_dsn']}')")
    if info.embed_base_url:
        out.print(f"Embeddings: OpenAIEmbeddings(base_url='{info.embed_base_url}', model='{info.embed_model_name}', "
                  "api_key='EMPTY', check_embedding_ctx_length=False)")
    out.print("Stop it with `accel down`.")


def down() -> None:
    """Stop what `accel up` started (never a server named by ACCEL_PG_DSN / ACCEL_OPENAI_BASE_URL)."""
    from accel.engines import stack

    with console.status("stopping the local stack") as status:
        stopped = stack.down(report=lambda msg: status.update(msg))
    out.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))


def doctor(as_json: bool = JSON_FLAG, verbose: bool = quiet.VERBOSE) -> None:
    """Check every engine with one real request; exit 1 if any is not ok."""
    quiet.configure(verbose)
    from accel.engines.doctor import check_all
    from accel.engines.stack import read_state

    info = read_state()
    with console.status("checking engines") as status:

        def show(health) -> None:
            mark = "[green]ok[/]" if health.ok else "[red]error[/]"
            console.print(f"{mark} {health.engine}: {health.detail}")
            status.update("checking engines")

        results = asyncio.run(check_all(info, on_result=None if as_json else show))
    ok = all(h.ok for h in results)
    if as_json:
        report = {
            "ok": ok,
            "engines": {h.engine: {"ok": h.ok, "detail": h.detail, "latency_s": h.latency_s} for h in results},
        }
        print_json(report)
    if not ok:
        raise typer.Exit(1)


def demo(keep: bool = typer.Option(False, "--keep", help="Leave the stack running afterwards."),
         verbose: bool = quiet.VERBOSE) -> None:
    """Start the local stack, send one real request through every engine, print what happened."""
    quiet.configure(verbose)
    from accel.engines import stack

    from .demo import run_demo

    was_up = stack.read_state() is not None
    with Steps(console) as steps:
        info = asyncio.run(stack.up(report=steps.step))
    try:
        asyncio.run(run_demo(info, out))
    finally:
        if not keep and not was_up:
            with console.status("stopping the local stack"):
                stack.down()
