"""Every example workload on engine twins, every mode with its bound: docs/benchmarks-twin.md.

    python -m accel.benchmarks.twin_suite --out docs/benchmarks/twin \\
        --validation docs/benchmarks/twin-validation/summary.json --doc docs/benchmarks-twin.md [--reuse]

For each example and framework it runs `accel bench <example> --twin h100-8b` in batch mode
(32 queries), single mode (8) and Poisson mode at stock's saturation rate (the throughput
stock-concurrent reached in the batch run). Every query of a batch or of a Poisson run may be in
flight at once (`--concurrency` = the queries): a batch of 32 is 32 concurrent runs, and Poisson
arrivals never wait for a free worker, so the runs are what the capacity bound bounds (at the
bench's default of 16, a batch of 32 went in two waves). Each report is kept as JSON; the table
compares accel-topology with the better of stock and stock-concurrent, and with the run's bound.

Issue 25's rule: no twin number is reported before both validation checks pass. The table is
written to `--doc` only when `--validation` names a check-1 summary that passed (between the
doc's table markers, where it has them); otherwise it goes to the output folder, headed NOT
VALIDATED. The table holds this invocation's examples only: after runs with `--only`, publish
every report with `--reuse` and no `--only`. Every number is labelled with the profile's label
("simulated from measured H100 curves").
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import llm_steps
from .summary import front_end_cpu_ms, headline, twin_busy_share, twin_cpu_ms

log = logging.getLogger("accel.benchmarks.twin_suite")

MODES = (("batch", 32), ("single", 8), ("poisson", 32))


def report_path(out: Path, example: str, framework: str, mode: str) -> Path:
    return out / f"{example}-{framework}-{mode}.json"


def run(example: str, framework: str, mode: str, queries: int, profile: str, path: Path, rate: float | None) -> dict[str, Any]:
    """`accel bench` on the twins in a process of its own, its report written to `path`."""
    command = [sys.executable, "-c", "from accel.cli import main; main()", "bench", example, "--framework", framework,
               "--mode", mode, "--queries", str(queries), "--concurrency", str(queries), "--twin", profile,
               "--json", str(path)]
    if rate is not None:
        command += ["--rate", f"{rate:.3f}"]
    subprocess.run(command, check=True, env=os.environ)
    return json.loads(path.read_text())


def saturation_rate(batch: dict[str, Any]) -> float | None:
    """Stock's saturation rate: the throughput stock-concurrent reached in the batch run."""
    stock = batch["systems"].get("stock-concurrent") or batch["systems"].get("stock-sequential") or {}
    return stock.get("throughput_qps")


def row(report: dict[str, Any]) -> dict[str, Any]:
    """accel-topology against the better stock system and against the bound."""
    systems = report["systems"]
    found = {name: headline(report, name) for name in ("stock-sequential", "stock-concurrent")}
    stocks = {name: seconds for name, seconds in found.items() if seconds}
    better = min(stocks, key=stocks.get) if stocks else None
    accel = headline(report, "accel-topology")
    bound = report.get("bound") or {}
    floor = (report.get("capacity_bound") or {}).get("step_floor") or {}
    return {"example": report["example"], "framework": report["framework"], "mode": report["mode"],
            "queries": report["config"]["queries"], "better_stock": better,
            "stock_s": stocks.get(better) if better else None, "accel_s": accel,
            "speedup": stocks[better] / accel if better and accel else None,
            "bound_s": bound.get("value_s") if bound.get("established", True) else None,
            "accel_over_bound": bound.get("accel_over_bound"),
            "as_sent_s": floor.get("as_sent_s"),
            "as_sent_encoders_s": floor.get("as_sent_encoders_s"),
            "equal": (systems.get("accel-topology") or {}).get("equal_rate"),
            "twin_lag_s": (report.get("simulated") or {}).get("twin_lag_s"),
            "stock_lag_s": (systems.get(better) or {}).get("twin_lag_s") if better else None,
            "accel_lag_s": (systems.get("accel-topology") or {}).get("twin_lag_s"),
            "stock_cpu_ms": front_end_cpu_ms(systems.get(better) if better else None),
            "accel_cpu_ms": front_end_cpu_ms(systems.get("accel-topology")),
            "stock_twin_cpu_ms": twin_cpu_ms(systems.get(better) if better else None, report["config"]["queries"]),
            "accel_twin_cpu_ms": twin_cpu_ms(systems.get("accel-topology"), report["config"]["queries"]),
            "stock_llm_busy": twin_busy_share(systems.get(better) if better else None),
            "accel_llm_busy": twin_busy_share(systems.get("accel-topology")),
            "stock_llm_floor": llm_steps.floor_share(systems.get(better) if better else None),
            "accel_llm_floor": llm_steps.floor_share(systems.get("accel-topology")),
            "host_ms": ((report.get("machine") or {}).get("host_speed") or {}).get("cpu_ms")}


def markdown(rows: list[dict[str, Any]], label: str, validated: bool) -> str:
    def num(value: float | None, fmt: str) -> str:
        return "n/a" if value is None else fmt.format(value)

    head = [] if validated else ["**NOT VALIDATED: validation check 1 has not passed; these numbers may not be reported.**", ""]
    lines = head + [f"Every number below is **{label}**. The host probe: `benchmarks/host_speed.py`'s fixed "
                    "piece of front-end work, its CPU milliseconds (the mean of before and after the run); more "
                    "is a slower host. LLM busy: the LLM twin's modelled busy time over the system's run (`twin_busy_s`); "
                    "at the floor: what of it the LLM's steps paid for reading the weights beyond their own work "
                    "(`llm_steps`; n/a: reports from before the twin logged its steps).", "",
                    "| example | framework | mode | queries | better stock | stock s | accel s | speed-up | bound s "
                    "| accel / bound | equal | twin lag s: run (stock / accel) | LLM busy (stock / accel) "
                    "| at the floor (stock / accel) | host probe ms |",
                    "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['example']} | {r['framework']} | {r['mode']} | {r['queries']} | {r['better_stock'] or 'n/a'} "
                     f"| {num(r['stock_s'], '{:.2f}')} | {num(r['accel_s'], '{:.2f}')} | {num(r['speedup'], '{:.2f}x')} "
                     f"| {num(r['bound_s'], '{:.2f}')} | {num(r['accel_over_bound'], '{:.2f}')} "
                     f"| {num(r['equal'], '{:.0%}')} | {num(r['twin_lag_s'], '{:.2f}')} "
                     f"({num(r['stock_lag_s'], '{:.2f}')} / {num(r['accel_lag_s'], '{:.2f}')}) "
                     f"| {num(r.get('stock_llm_busy'), '{:.0%}')} / {num(r.get('accel_llm_busy'), '{:.0%}')} "
                     f"| {num(r.get('stock_llm_floor'), '{:.0%}')} / {num(r.get('accel_llm_floor'), '{:.0%}')} "
                     f"| {num(r['host_ms'], '{:.1f}')} |")
    return "\n".join(lines) + "\n"


def suite(examples: dict[str, Any], names: list[str], profile: str, out: Path, *, reuse: bool = False,
          runner: Callable[..., dict[str, Any]] = run) -> list[dict[str, Any]]:
    """One row per example, framework and mode. With `reuse`, a report already in `out` is read
    instead of run again (a suite stopped half-way goes on; the table covers every report)."""
    rows = []
    for name in names:
        for framework in examples[name].modules:
            batch = None
            for mode, queries in MODES:
                path = report_path(out, name, framework, mode)
                if reuse and path.is_file():
                    report = json.loads(path.read_text())
                else:
                    rate = saturation_rate(batch) if mode == "poisson" and batch else None
                    if mode == "poisson" and rate is None:
                        log.warning("%s %s: no stock throughput from the batch run, so no Poisson run", name, framework)
                        continue
                    report = runner(name, framework, mode, queries, profile, path, rate)
                batch = report if mode == "batch" else batch
                rows.append(row(report))
    return rows


TABLE_START, TABLE_END = "<!-- twin_suite table -->", "<!-- /twin_suite table -->"
TITLE = ("# Benchmarks on engine twins\n\n"
         "Made by `python -m accel.benchmarks.twin_suite` (benchmarks/twin_suite.py): every example workload, "
         "batch 32, single 8 and Poisson at stock's saturation rate, accel-topology against the better of "
         "stock and stock-concurrent (mean latency, makespan, or p95 for Poisson) and against the run's bound.\n\n")


def publish(doc: Path, table: str, markers: tuple[str, str] = (TABLE_START, TABLE_END)) -> None:
    """Write the table into `doc` between its `markers`, so the prose around them stays; a doc
    without them is written afresh: the title, then the table between markers."""
    start, end = markers
    text = doc.read_text() if doc.is_file() else ""
    if start in text and end in text:
        before, rest = text.split(start, 1)
        doc.write_text(before + start + "\n" + table + rest[rest.index(end):])
    else:
        doc.write_text(TITLE + start + "\n" + table + end + "\n")


def validated(summary: Path | None) -> bool:
    return summary is not None and summary.is_file() and json.loads(summary.read_text()).get("passed") is True


def main() -> None:
    from accel.benchmarks.apps import EXAMPLES
    from accel.engines.twin.profile import load_profile

    parser = argparse.ArgumentParser(prog="python -m accel.benchmarks.twin_suite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", default="h100-8b")
    parser.add_argument("--validation", type=Path, help="check 1's summary.json (benchmarks/twin_validation.py)")
    parser.add_argument("--doc", type=Path, help="where the table goes once validated (docs/benchmarks-twin.md)")
    parser.add_argument("--only", default="", help="comma-separated examples (default: all)")
    parser.add_argument("--reuse", action="store_true", help="read the reports already in --out instead of running them")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.only.split(",") if n] or list(EXAMPLES)
    rows = suite(EXAMPLES, names, args.profile, args.out, reuse=args.reuse)
    ok = validated(args.validation)
    text = markdown(rows, load_profile(args.profile).label, ok)
    (args.out / "table.md").write_text(TITLE + text)
    if ok and args.doc:
        publish(args.doc, text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
