"""What accel costs where it has nothing to lower: per-call time of stock vs `accel.wrap` vs
`ACCEL_AUTO` (the patched entry points) on LCEL chains and LangGraph graphs with no engine work
(`benchmarks/overhead_apps.py`).

    .venv/bin/python -m accel.benchmarks.overhead [--calls 100] [--rounds 15] [--apps graph,lambda]

Systems run side by side in one process, interleaved in rounds (the order rotating each round)
so that machine noise hits each alike. A figure is the mean per-call CPU time of this process
over `--calls` calls (`time.process_time`: other processes loading the machine do not inflate
it as they inflate wall time); a ratio is taken within each round (paired) and reported as the
median over rounds with its interquartile range. Entry points: invoke, ainvoke, stream,
astream, and "new app" (build the app, then call it once, as each test of a framework's suite
does: under ACCEL_AUTO or wrap that first call makes the drop-in). Goal (issues 16, 27): at
most 1.10x of stock.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from accel.benchmarks.overhead_apps import App, apps

SYSTEMS = ("stock", "accel.wrap", "ACCEL_AUTO")
MODES = ("invoke", "ainvoke", "stream", "astream", "new app")
GOAL = 1.10


@contextlib.contextmanager
def auto_mode() -> Iterator[None]:
    """What `ACCEL_AUTO=1` does to the frameworks already imported (`accel.patches`): the
    entry points patched and engine-call capture process-wide; undone on exit (the floor's
    plug-ins stay installed, as any `accel.wrap` leaves them; outside runs they run stock)."""
    from accel.adapters.common import floor
    from accel.patches import langchain, langgraph

    langchain.patch()
    langgraph.patch()
    floor.install()
    floor.set_auto(True)
    try:
        yield
    finally:
        floor.set_auto(False)
        langgraph.unpatch()
        langchain.unpatch()


def _call(mode: str, app: Any, input: Any) -> Any:
    return app.invoke(input) if mode == "invoke" else list(app.stream(input))


def _timed(mode: str, system: str, app: App, target: Any, calls: int, loop: asyncio.AbstractEventLoop) -> tuple[float, Any]:
    """Mean CPU seconds per call over `calls` calls, and the last call's result."""
    import accel

    async def acall(n: int) -> tuple[float, Any]:
        method = getattr(target, mode)
        start, result = time.process_time(), None
        for _ in range(n):
            result = await method(app.input) if mode == "ainvoke" else [c async for c in method(app.input)]
        return time.process_time() - start, result

    if mode in ("ainvoke", "astream"):
        spent, result = loop.run_until_complete(acall(calls))
        return spent / calls, result
    start, result = time.process_time(), None
    for _ in range(calls):
        if mode == "new app":
            fresh = app.build()
            result = (accel.wrap(fresh) if system == "accel.wrap" else fresh).invoke(app.input)
        else:
            result = _call(mode, target, app.input)
    return (time.process_time() - start) / calls, result


def measure(selected: list[App], modes: tuple[str, ...], calls: int, rounds: int, progress: Any = None) -> dict[str, Any]:
    """Per app, mode and system: the per-round microseconds per call; and the calls whose
    result differed from stock's (there should be none)."""
    import accel

    loop = asyncio.new_event_loop()
    built = [(app, app.build()) for app in selected]
    targets = {app.name: {"stock": chain, "accel.wrap": accel.wrap(chain), "ACCEL_AUTO": chain} for app, chain in built}
    us: dict[str, dict[str, dict[str, list[float]]]] = {a.name: {m: {s: [] for s in SYSTEMS} for m in modes} for a in selected}
    differs: set[str] = set()
    task = progress.add_task("rounds", total=rounds) if progress else None
    try:
        for r in range(rounds):
            order = SYSTEMS[r % 3:] + SYSTEMS[:r % 3]
            for app in selected:
                for mode in modes:
                    results = {}
                    for system in order:
                        with auto_mode() if system == "ACCEL_AUTO" else contextlib.nullcontext():
                            per_call, results[system] = _timed(mode, system, app, targets[app.name][system], calls, loop)
                        us[app.name][mode][system].append(per_call * 1e6)
                    if any(_same_form(mode, results[s]) != _same_form(mode, results["stock"]) for s in SYSTEMS):
                        differs.add(f"{app.name} {mode}")
            if progress:
                progress.advance(task)
    finally:
        loop.close()
    return {"us": us, "families": {a.name: a.family for a in selected}, "differs": sorted(differs)}


def _same_form(mode: str, result: Any) -> Any:
    """A result as compared with stock's: a stream's chunks in any order (a parallel step's
    chunks come as its branches finish, in stock too)."""
    return sorted(map(repr, result)) if mode in ("stream", "astream") else result


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """Per app and mode: median microseconds per system and each accel system's ratio to
    stock (median of the per-round ratios, with its quartiles)."""
    table: dict[str, Any] = {}
    for app, modes in results["us"].items():
        for mode, by_system in modes.items():
            row = {f"{s} us": statistics.median(v) for s, v in by_system.items()}
            for system in SYSTEMS[1:]:
                ratios = [a / b for a, b in zip(by_system[system], by_system["stock"])]
                row[system] = _quartiles(ratios)
            table[f"{app} | {mode}"] = {"family": results["families"][app], **row}
    return table


def report(table: dict[str, Any], differs: list[str]) -> str:
    lines = [f"{'app | entry':34} {'stock us':>9} {'wrap us':>9} {'auto us':>9}   {'wrap/stock [IQR]':>22}   {'auto/stock [IQR]':>22}",
             "(CPU microseconds per call: median of rounds; ratios: median of per-round ratios [quartiles])"]
    worst: dict[tuple[str, str], float] = {}
    for key, row in table.items():
        cells = []
        for system in SYSTEMS[1:]:
            q1, median, q3 = row[system]
            cells.append(f"{median:7.3f}x [{q1:.3f}-{q3:.3f}]")
            worst[row["family"], system] = max(worst.get((row["family"], system), 0.0), median)
        lines.append(f"{key:34} {row['stock us']:9.1f} {row['accel.wrap us']:9.1f} {row['ACCEL_AUTO us']:9.1f}   "
                     f"{cells[0]:>22}   {cells[1]:>22}")
    head = [f"worst median ratio, {family} under {system}: {ratio:.3f}x of stock (goal <= {GOAL:.2f}x)"
            for (family, system), ratio in sorted(worst.items())]
    tail = [f"RESULTS DIFFER FROM STOCK: {', '.join(differs)}"] if differs else []
    return "\n".join(head + [""] + lines + tail)


def main(argv: list[str] | None = None) -> None:
    from rich.progress import Progress

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="calls per system, app and entry point in a round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--apps", default="", help="comma-separated substrings of app names (default: all)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--json", help="write the per-round microseconds and the summary here")
    args = parser.parse_args(argv)
    wanted = [w.strip() for w in args.apps.split(",") if w.strip()]
    selected = [app for app in apps() if not wanted or any(w in app.name for w in wanted)]
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    load = os.getloadavg()
    with Progress(transient=True) as progress:
        results = measure(selected, modes, args.calls, args.rounds, progress)
    table = summarise(results)
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after; "
          f"{args.rounds} rounds x {args.calls} calls")
    print(report(table, results["differs"]))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"results": results, "summary": table}, out, indent=1)


if __name__ == "__main__":
    main()
