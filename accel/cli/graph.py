"""`accel graph module:attr`: what accel makes of an app, without running it.

Imports `attr` from `module` (an LCEL chain, a LlamaIndex query engine, a compiled LangGraph,
... as the app builds it), wraps it, prints `explain()` and draws the p-graph beside the
e-graph after the passes.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import typer


def load_app(spec: str) -> object:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise typer.BadParameter(f"{spec!r}: expected MODULE:ATTR, e.g. myapp.chains:rag_chain")
    sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.pop(0)
    target: object = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise typer.BadParameter(f"{module_name} has no attribute {attr!r}")
        target = getattr(target, part)
    return target() if callable(target) and not hasattr(target, "invoke") and not hasattr(target, "query") else target


def graph(
    app: str = typer.Argument(..., help="MODULE:ATTR of the app object, or of a function that builds it"),
    out: Path = typer.Option(Path("graph.png"), "--out", "-o", help="picture to write (.png, .svg, .mmd, .md, .dot)"),
) -> None:
    """Print what accel lowers in an app and draw its graph before and after the passes."""
    import accel

    fast = accel.wrap(load_app(app))
    explain = getattr(fast, "explain", None)
    if explain is None:
        typer.echo(f"accel.wrap gave a {type(fast).__name__} with no explain()", err=True)
        raise typer.Exit(1)
    try:
        text = explain(picture=out)
    except TypeError:  # an adapter whose explain() draws nothing yet
        text = explain()
    typer.echo(text)
    if out.exists():
        typer.echo(f"\ngraph: {out}")
