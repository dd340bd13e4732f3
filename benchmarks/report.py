"""The comparison report for people: a markdown table per run, and the JSON file for machines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import host_speed
from .summary import bound_line


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if value is None else fmt.format(value)


def markdown(report: dict[str, Any]) -> str:
    """Headline table (one row per system) plus the lower bound and any failures."""
    mode = report["mode"]
    lines = [
        f"### {report['example']} · {report['framework']} · {mode} · {report['config']['queries']} queries",
        "",
        f"**{report['verdict']}**" if report.get("verdict") else "",
        "",
        f"{report['date']} · {report['machine']['cpus']} CPU cores, no GPU, load {report['machine']['load_average_1m_at_start']:.1f} at start"
        f" · {host_speed.describe(report['machine'].get('host_speed'))} · LLM `{Path(report['engines']['llm']).name}`"
        f" · headline: {report['headline_metric']} · prefix cache reset between systems: "
        f"{'yes' if report['prefix_cache_reset_between_systems'] else 'no'}"
        f" · `equal`: same answer as {report.get('equality_reference') or 'no reference run'}",
        "",
        "| system | mean s | p50 s | p95 s | p99 s | throughput q/s | vs stock | vs stock-concurrent | vs LlamaDistPC | equal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, summary in report["systems"].items():
        lat = summary["latency"] or {}
        if summary["setup_error"]:
            lines.append(f"| {name} | failed ({summary['setup_error'].split(':')[0]}, see JSON) |||||||||")
            continue
        lines.append(
            f"| {name} | {_num(lat.get('mean'))} | {_num(lat.get('p50'))} | {_num(lat.get('p95'))} | {_num(lat.get('p99'))} "
            f"| {_num(summary['throughput_qps'], '{:.3f}')} | {_num(report['speedup_vs_stock'].get(name), '{:.2f}x')} "
            f"| {_num(report['speedup_vs_stock_concurrent'].get(name), '{:.2f}x')} "
            f"| {_num(report['speedup_vs_llamadistpc'].get(name), '{:.2f}x')} "
            f"| {_num(summary['equal_rate'], '{:.0%}')} |"
        )
    line = bound_line(report)
    if line:
        bound = report["bound"]
        spread = bound.get("accel_over_bound_spread") or {}
        ratio = (f"; {bound.get('system', 'accel')} / bound = {bound['accel_over_bound']:.2f}"
                 + (f" ({spread['low']:.2f}-{spread['high']:.2f} over the rounds)" if spread.get("rounds", 0) > 1 else "")
                 if bound.get("accel_over_bound") is not None else "")
        lines += ["", line[0].upper() + line[1:] + ratio + "."]
    capacity = report.get("capacity_bound")
    if capacity and capacity.get("engines"):
        engines = ", ".join(f"{e['engine']} {e['items_per_query']:.3g} {e['unit']}/query at {e['best_throughput']:.3g}/s "
                            f"(batch {e['best_batch']})" for e in capacity["engines"])
        lines.append(f"Capacity bound's median round: {engines}.")
    failures = {n: s for n, s in report["systems"].items() if s["failed_queries"]}
    for name, summary in failures.items():
        lines.append(f"- {name}: {summary['failed_queries']} failed queries, first: `{summary['errors'][0][:160]}`")
    if report.get("rates"):
        with_bound = any(at.get("bound_p95_s") for at in report["rates"])
        columns = list(report["systems"]) + (["bound"] if with_bound else [])
        lines += ["", "| rate q/s | " + " | ".join(columns) + " |", "|---:|" + "---:|" * len(columns)]
        for at in report["rates"]:
            cells = [_num((s["latency"] or {}).get("p95")) for s in at["systems"].values()]
            bound_cell = f" {_num(at.get('bound_p95_s'))} |" if with_bound else ""
            lines.append(f"| {at['rate']} | " + " | ".join(cells) + " |" + bound_cell)
        lines.append("(p95 latency in seconds per request rate" + ("; bound: the capacity bound's p95)" if with_bound else ")"))
    return "\n".join(lines) + "\n"


def write_json(report: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(json.dumps(report, indent=2, default=str) + "\n")
    staging.replace(path)
    return path
