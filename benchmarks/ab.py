"""Two versions of accel side by side on this machine: `accel bench` taking turns between a base
revision and the working tree, round after round.

A change worth a few percent is smaller than this machine's drift over an hour: three hours
apart, stock's CPU a query read 20-50% higher on the same code (docs/benchmarks-twin.md), so two
versions measured at different times compare the hours, not the code. Run in turns, the two
share the host's slow minutes; the order swaps every round (base first in odd rounds), so
neither always runs on a machine the other just warmed or heated. Each version runs in a
process of its own from its own tree (`git worktree` for the base, checked out once and removed
after), and the tool checks that each process imports accel from the tree it names before
running anything.

    python -m accel.benchmarks.ab --base f03f8ac --rounds 3 -- advanced-rag --framework llamaindex \\
        --twin h100-8b --mode batch --queries 32 --concurrency 32 --systems accel-topology

Everything after `--` goes to `accel bench` (not `--json`: each run's report is kept in `--out`).
The table gives each system's headline (makespan in batch mode, mean latency in single mode,
p95 in Poisson mode) and front-end CPU a query, median and range per version, the ratio of the
medians and in how many rounds the working tree's run was the faster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.engines.errors import InvalidRequest

from .summary import front_end_cpu_ms, headline

SIDES = ("base", "head")
BENCH = ("-c", "from accel.cli import main; main()", "bench")


@dataclass(frozen=True)
class Side:
    """One version: its name and the tree accel is imported from."""

    name: str
    root: Path

    def env(self) -> dict[str, str]:
        """This process's environment with only the side's tree on PYTHONPATH (an inherited
        PYTHONPATH would decide which accel the child imports)."""
        return {**os.environ, "PYTHONPATH": str(self.root)}


def order(rounds: int) -> list[tuple[int, str]]:
    """(round, side) in running order: base first in odd rounds, head first in even ones."""
    return [(r, side) for r in range(1, rounds + 1) for side in (SIDES if r % 2 else SIDES[::-1])]


def imported_from(side: Side) -> Path:
    """Where a child process of `side` imports accel from; it must lie in the side's tree. The
    child runs in the tree, so the directory `python -c` puts first on sys.path is the tree too."""
    done = subprocess.run([sys.executable, "-c", "import accel, os; print(os.path.realpath(accel.__file__))"],
                          env=side.env(), cwd=side.root, capture_output=True, text=True)
    if done.returncode != 0:
        raise InvalidRequest("ab", f"the {side.name} tree {side.root} does not import: {done.stderr.strip()[-300:]}",
                         "check that the revision has an accel package at its root")
    path = Path(done.stdout.strip())
    if not path.is_relative_to(side.root.resolve()):
        raise InvalidRequest("ab", f"the {side.name} run would import accel from {path}, not from {side.root}",
                             "run the tool from the working tree's root, without an accel installed elsewhere first on sys.path")
    return path


@contextmanager
def checkout(revision: str, repo: Path) -> Iterator[Path]:
    """A detached worktree of `revision`, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="accel-ab-") as scratch:
        tree = Path(scratch) / "base"
        done = subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), revision],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise InvalidRequest("ab", f"cannot check out {revision!r}: {done.stderr.strip()[-300:]}",
                                 "name a commit of this repository (`git log --oneline`)")
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], capture_output=True)


def bench(side: Side, args: Sequence[str], report: Path) -> dict[str, Any]:
    """One `accel bench` run of `side`, its report written to `report`."""
    if "--json" in args:
        raise InvalidRequest("ab", "the bench arguments name --json", "leave it out: each run's report goes to --out")
    subprocess.run([sys.executable, *BENCH, *args, "--json", str(report)], env=side.env(), cwd=side.root, check=True)
    return json.loads(report.read_text())


def compare(runs: Sequence[tuple[int, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per system: each version's headline and CPU a query (medians and ranges), head over base,
    and the rounds in which head was the faster. `runs`: (round, side, report)."""
    systems = sorted({name for _, _, report in runs for name in report["systems"]})
    rows = []
    for system in systems:
        row: dict[str, Any] = {"system": system}
        by_round: dict[str, dict[int, float]] = {}
        for side in SIDES:
            mine = [(r, report) for r, s, report in runs if s == side]
            by_round[side] = {r: v for r, v in ((r, headline(report, system)) for r, report in mine) if v is not None}
            cpu = [v for v in (front_end_cpu_ms(report["systems"].get(system)) for _, report in mine) if v is not None]
            row[side] = _stats(list(by_round[side].values()))
            row[f"{side}_cpu_ms"] = _stats(cpu)
            row[f"{side}_equal"] = min((report["systems"].get(system) or {}).get("equal_rate", 1.0) or 0.0
                                       for _, report in mine)
        paired = sorted(set(by_round["base"]) & set(by_round["head"]))
        row["head_faster"] = sum(by_round["head"][r] < by_round["base"][r] for r in paired)
        row["paired_rounds"] = len(paired)
        base, head = row["base"], row["head"]
        row["ratio"] = head["median"] / base["median"] if base and head else None
        rows.append(row)
    return rows


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "low": min(values), "high": max(values), "n": len(values)}


def markdown(rows: list[dict[str, Any]], report: dict[str, Any], base: str) -> str:
    metric = report["headline_metric"]
    lines = [f"{report['example']} · {report['framework']} · {report['mode']} · {report['config']['queries']} queries; "
             f"base {base} against the working tree, {metric} in s (median, range) and front-end CPU ms a query",
             "", "| system | base | head | head / base | head faster | CPU base / head | equal base / head |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "n/a"
        lines.append(f"| {row['system']} | {_cell(row['base'], '.3f')} | {_cell(row['head'], '.3f')} | {ratio} | "
                     f"{row['head_faster']} of {row['paired_rounds']} | {_median(row['base_cpu_ms'])} / "
                     f"{_median(row['head_cpu_ms'])} | {row['base_equal']:.0%} / {row['head_equal']:.0%} |")
    return "\n".join(lines) + "\n"


def _cell(stats: dict[str, float] | None, fmt: str) -> str:
    if not stats:
        return "n/a"
    return f"{stats['median']:{fmt}} ({stats['low']:{fmt}}-{stats['high']:{fmt}})"


def _median(stats: dict[str, float] | None) -> str:
    return f"{stats['median']:.1f}" if stats else "n/a"


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("usage: python -m accel.benchmarks.ab --base REV [--rounds N] [--out DIR] -- <accel bench arguments>")
    at = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m accel.benchmarks.ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the revision to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="where each run's report goes (default: a new temporary folder)")
    args = parser.parse_args(argv[:at])
    bench_args = argv[at + 1:]
    if args.rounds < 1:
        raise InvalidRequest("ab", f"--rounds {args.rounds}", "run at least one round")
    head_root = Path(__file__).resolve().parents[1]  # benchmarks/ sits at the tree's root
    out = args.out or Path(tempfile.mkdtemp(prefix="accel-ab-out-"))
    out.mkdir(parents=True, exist_ok=True)
    with checkout(args.base, head_root) as base_root:
        sides = {"base": Side("base", base_root), "head": Side("head", head_root)}
        for side in sides.values():
            imported_from(side)
        runs = []
        for r, name in order(args.rounds):
            runs.append((r, name, bench(sides[name], bench_args, (out / f"{name}-{r}.json").resolve())))
    rows = compare(runs)
    text = markdown(rows, runs[0][2], args.base)
    (out / "ab.json").write_text(json.dumps({"base": args.base, "bench": bench_args, "rows": rows}, indent=2))
    (out / "ab.md").write_text(text)
    sys.stdout.write(text + f"\nreports: {out}\n")


if __name__ == "__main__":
    main()
