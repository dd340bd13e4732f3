"""PNG pictures of a report: latency vs request rate per system (like Teola Figure 8) for
Poisson runs, and per-system bars with the ablations (like Teola Figure 10) for every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402


def bars(report: dict[str, Any], path: Path) -> Path:
    """The headline number per system (failed systems left out), lower bound as a line."""
    metric = {"single": "mean", "poisson": "p95"}.get(report["mode"])
    names, values = [], []
    for name, summary in report["systems"].items():
        value = summary["makespan_s"] if metric is None else (summary["latency"] or {}).get(metric)
        if summary["setup_error"] is None and value is not None:
            names.append(name)
            values.append(value)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(names) + 2), 4))
    colors = ["#888888" if not n.startswith("accel") else ("#1f77b4" if "-no-" not in n else "#9ecae1") for n in names]
    ax.bar(names, values, color=colors)
    bound = report.get("bound") or {}
    title = f"{report['example']} · {report['framework']} · {report['mode']} · {report['config']['queries']} queries"
    if bound.get("value_s") and bound.get("established", True):  # a bound above a measured system is no bound
        ax.axhline(bound["value_s"], color="#d62728", linestyle="--", label=f"{bound['kind']} bound")
        ax.legend()
        if bound.get("accel_over_bound"):
            title += f"\naccel / bound = {bound['accel_over_bound']:.2f}"
    ax.set_ylabel(f"{report['headline_metric']} (s)")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=35)
    fig.tight_layout()
    return save(fig, path)


def latency_vs_rate(report: dict[str, Any], path: Path) -> Path:
    """Mean and p95 latency of each system against the request rate."""
    fig, (mean_ax, p95_ax) = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for name in report["systems"]:
        points = [(at["rate"], at["systems"][name]["latency"]) for at in report["rates"] if name in at["systems"]]
        points = [(rate, lat) for rate, lat in points if lat]
        if points:
            rates = [rate for rate, _ in points]
            mean_ax.plot(rates, [lat["mean"] for _, lat in points], marker="o", label=name)
            p95_ax.plot(rates, [lat["p95"] for _, lat in points], marker="o", label=name)
    established = (report.get("bound") or {}).get("established", True)
    bounds = [(at["rate"], at["bound_p95_s"]) for at in report["rates"] if at.get("bound_p95_s") and established]
    if bounds:
        p95_ax.plot([r for r, _ in bounds], [b for _, b in bounds], color="#d62728", linestyle="--", label="capacity bound")
    for ax, what in ((mean_ax, "mean"), (p95_ax, "p95")):
        ax.set_xlabel("request rate (queries/s)")
        ax.set_ylabel(f"{what} latency (s)")
    p95_ax.legend(fontsize=7)
    fig.suptitle(f"{report['example']} · {report['framework']} · latency vs request rate")
    fig.tight_layout()
    return save(fig, path)


def plot(report: dict[str, Any], path: Path) -> list[Path]:
    """`path` gets the bars; a Poisson report also gets `<stem>-rates.png` beside it."""
    written = [bars(report, path)]
    if report.get("rates"):
        written.append(latency_vs_rate(report, path.with_name(f"{path.stem}-rates{path.suffix or '.png'}")))
    return written


def save(fig: Any, path: Path) -> Path:
    """Write `fig` as a PNG at `path` (folders made) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
