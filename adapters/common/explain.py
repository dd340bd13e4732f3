"""`explain()` text shared by the adapters: what was lowered, what stayed opaque and why, the
passes applied and the resulting e-graph."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("accel.adapters")
lost_lowerings: Counter[tuple[str, str]] = Counter()
"""Captures that left a lowerable component on the floor, per (component, reason)."""
_lost_lock = threading.Lock()


def lost_lowering(component: str, why: str) -> None:
    """A component accel lowers but for one of its options (`why`): it runs as-is, its engine
    calls going through the floor. Counted per reason, logged the first time."""
    with _lost_lock:
        lost_lowerings[(component, why)] += 1
        first = lost_lowerings[(component, why)] == 1
    if first:
        log.info("%s is not lowered (its engine calls still go through the floor): %s", component, why)


def rerank_miss_lines() -> list[str]:
    """`explain()`'s line on reranker calls a rerank-ahead sheet could not answer (their pairs
    scored ahead in vain), by why."""
    from accel.adapters.common.rerank_ahead import misses

    if not misses:
        return []
    return ["reranker calls not answered from a rerank-ahead score sheet, sent as stock sends them (process-wide): "
            + ", ".join(f"{why} {n}" for why, n in sorted(misses.items()))]


def explain_text(title: str, steps: Iterable[Any], template: Any) -> str:
    """`steps` have `.component`, `.lowered`, `.detail`; `template` is the cached e-graph."""
    steps = list(steps)
    graph = template.graph
    lines = [title, "", "components:"]
    for step in steps:
        mark = "lowered" if step.lowered else "opaque "
        lines.append(f"  [{mark}] {step.component}: {step.detail}")
    opaque = [s for s in steps if not s.lowered]
    lines.append(f"  ({len(steps) - len(opaque)} lowered, {len(opaque)} opaque)")
    lines += ["", f"passes applied: {', '.join(graph.meta.get('passes', [])) or 'none'}"]
    lines += [f"  {note}" for note in graph.meta.get("notes", [])]
    kinds = Counter(str(node.kind) for node in graph.nodes())
    lines += ["", "e-graph: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))]
    for name in template.order:
        node = graph.node(name)
        preds = ", ".join(graph.preds(name))
        engine = f" @{node.engine}" if node.engine else ""
        lines.append(f"  d{node.depth} {node.kind}{engine} {name}" + (f" <- {preds}" if preds else ""))
    return "\n".join(lines)


def draw(template: Any, picture: Any) -> Any:
    """Write the p-graph and the optimised e-graph side by side to `picture` (.png, .svg,
    .pdf, .mmd, .md or .dot); returns the path written."""
    from accel.tracer.render import render_before_after

    return render_before_after(template.p_graph or template.graph, template.graph, picture)
