"""Where an accel run's time goes, node by node: accel's own primitive spans (accel/tracer),
recorded in memory for one measured window, summarised per node and drawn as a timeline.

A makespan far above its bound says that time was lost, not where. The spans say when each
query reached each node and how long it stayed: on the `h100-8b` twins they showed the
LlamaIndex batch's rerank stage lying between every query's first LLM call and its last
three, where a bound that takes the busiest device alone cannot see it
(docs/benchmarks-twin.md). Recording costs the loop CPU, so a traced run is a diagnosis,
never a goal's run.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from accel.tracer import spans as accel_spans

QUERY_SPAN = "accel.query"


@dataclass
class Recorder:
    """accel's spans from `start()` on (the measured window: the warm-up query is left out)."""

    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    started_ns: int | None = None

    def start(self, now_ns: int) -> None:
        self.exporter.clear()
        self.started_ns = now_ns

    def rows(self) -> list[dict[str, Any]]:
        """One row a span, times in seconds from `start()`; spans begun before it are left out."""
        origin = self.started_ns
        if origin is None:
            return []
        out = []
        for span in self.exporter.get_finished_spans():
            if span.start_time is None or span.end_time is None or span.start_time < origin:
                continue
            attrs = span.attributes or {}
            out.append({
                "name": span.name,
                "node": attrs.get(accel_spans.NODE, QUERY_SPAN if span.name == QUERY_SPAN else span.name),
                "query": attrs.get(accel_spans.QUERY_ID),
                "engine": attrs.get(accel_spans.ENGINE),
                "batch_size": attrs.get(accel_spans.BATCH_SIZE),
                "queue_wait_s": attrs.get(accel_spans.QUEUE_WAIT_S),
                "prompt_tokens": attrs.get(accel_spans.PROMPT_TOKENS),
                "cached_tokens": attrs.get(accel_spans.CACHED_TOKENS),
                "completion_tokens": attrs.get(accel_spans.COMPLETION_TOKENS),
                "start_s": (span.start_time - origin) / 1e9,
                "end_s": (span.end_time - origin) / 1e9,
            })
        return out


@contextmanager
def recording() -> Iterator[Recorder]:
    """accel's spans go to an in-memory exporter while inside (sessions made before read the
    provider per query, so this covers them too); the caller's own provider comes back after."""
    recorder = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(recorder.exporter))
    before = accel_spans.current_tracer_provider()
    accel_spans.use_tracer_provider(provider)
    try:
        yield recorder
    finally:
        accel_spans.use_tracer_provider(before)
        provider.shutdown()


def by_node(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per node, in the order queries first reached it: how many spans, when the first and the
    last began (the spread says how staggered the queries arrived), when the last ended, and
    the median and longest span."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row["node"]), []).append(row)
    summary = []
    for node, spans in groups.items():
        starts = [s["start_s"] for s in spans]
        durations = [s["end_s"] - s["start_s"] for s in spans]
        sizes = [s["batch_size"] for s in spans if s["batch_size"]]
        summary.append({
            "node": node,
            "spans": len(spans),
            "first_start_s": round(min(starts), 4),
            "last_start_s": round(max(starts), 4),
            "last_end_s": round(max(s["end_s"] for s in spans), 4),
            "median_s": round(statistics.median(durations), 4),
            "max_s": round(max(durations), 4),
            "median_batch": statistics.median(sizes) if sizes else None,
        })
    return sorted(summary, key=lambda s: (s["first_start_s"], s["last_end_s"]))


def table(summary: list[dict[str, Any]], *, least_s: float = 0.001) -> str:
    """The per-node summary as text, nodes whose every span took under `least_s` left out
    (pass-through and inline nodes: dozens of them, none holding time)."""
    lines = [f"{'node':<32} {'spans':>5} {'first start':>11} {'last start':>10} {'last end':>8} "
             f"{'median s':>8} {'max s':>6} {'batch':>5}"]
    for s in summary:
        if s["max_s"] < least_s:
            continue
        batch = "" if s["median_batch"] is None else f"{s['median_batch']:g}"
        lines.append(f"{s['node'][:32]:<32} {s['spans']:>5} {s['first_start_s']:>11.3f} {s['last_start_s']:>10.3f} "
                     f"{s['last_end_s']:>8.3f} {s['median_s']:>8.3f} {s['max_s']:>6.3f} {batch:>5}")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, title: str, *, least_s: float = 0.001) -> Path:
    """A timeline: a lane per node (in the order queries reached them), a bar per span."""
    from accel.benchmarks.plots import plt, save

    order = [s["node"] for s in by_node(rows) if s["max_s"] >= least_s and s["node"] != QUERY_SPAN]
    lane = {node: i for i, node in enumerate(order)}
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.32 * len(order) + 1.5)))
    for row in rows:
        i = lane.get(str(row["node"]))
        if i is not None:
            ax.hlines(i, row["start_s"], row["end_s"], color="#1f77b4", alpha=0.35, linewidth=6)
    ax.set_yticks(range(len(order)), [n[:40] for n in order], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the measured window began")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return save(fig, path)


def timelines(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each traced run's timeline in a report: per system in a batch, per system and rate in a
    Poisson report (`system @ rate/s`; its headline systems repeat the highest rate's runs)."""
    if report.get("rates"):
        return [(f"{name} @ {at['rate']}/s", s["timeline"]) for at in report["rates"]
                for name, s in at["systems"].items() if s.get("timeline")]
    return [(name, s["timeline"]) for name, s in report["systems"].items() if s.get("timeline")]


def write(report: dict[str, Any], path: Path) -> list[tuple[str, str, Path]]:
    """Move the report's spans to `path` (JSON: every traced run's spans and per-node summary)
    and draw a timeline per run beside it (`<stem>-<label>.png`); the report keeps the
    summaries. Returns (label, summary table, picture) per run."""
    title = f"{report['example']} · {report['framework']} · {report['mode']} · {report['config']['queries']} queries"
    if report.get("simulated"):
        title += " · simulated from measured H100 curves"
    written, document = [], {}
    for label, timeline in timelines(report):
        rows = timeline["spans"]
        document[label] = {"nodes": timeline["nodes"], "spans": rows}
        slug = "".join(c if c.isalnum() or c in "-." else "-" for c in label.replace(" @ ", "-at-").replace("/s", "qps"))
        picture = plot(rows, path.with_name(f"{path.stem}-{slug}.png"), f"{title}\n{label}: accel's spans, recorded")
        written.append((label, table(timeline["nodes"]), picture))
    for system in [*report["systems"].values(), *(s for at in report.get("rates") or [] for s in at["systems"].values())]:
        (system.get("timeline") or {}).pop("spans", None)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1))
    return written
