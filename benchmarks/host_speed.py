"""How fast this host runs a front end's kind of Python today: a fixed piece of work timed in
CPU time, before and after each benchmark.

On engine twins (and on GPUs) the front end's own CPU decides much of a batch's time, and it
moves with the host: on 2026-12-06 the same code's stock CPU a query rose from 28 to 36 ms
(advanced RAG LangChain) between the afternoon and the evening on the same kind of machine, and
since stock spends 2-5x accel's CPU a query, a goal's verdict moved with it (1 of 8 met at
17:15 UTC, 4 of 8 at 19:37). A system's own CPU a query cannot tell the host from the code (a
change to accel moves it too); this probe can: its work never changes. It mixes what a front
end spends its time on (pydantic models, JSON, string building, dicts, an asyncio loop's task
round trips), runs in an interpreter of its own (the caller's heap is not the host's speed),
with the collector held off, and reads its thread's CPU clock, so other processes on the
machine only count where they slow this core (shared caches, a neighbour's load on the host),
which is what slows a front end.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from pydantic import BaseModel

log = logging.getLogger("accel.benchmarks.host_speed")

REPEATS = 7
REFERENCE_MS: float | None = 18.0
"""The probe's median on the reference machine kind (2 cores, AMD EPYC), quiet, 2026-12-07
00:52 UTC: 17.4-18.2 ms in four of five probes a few seconds apart, one 22.0 ms (a slow spell
of the host); 19.6 ms in a process holding 3 million live objects. A report gives its probe
as a ratio of this."""

_WORDS = ("heap", "push", "pop", "queue", "asyncio", "event", "loop", "vector", "search", "token",
          "prefill", "decode", "rerank", "embed", "chunk", "answer")
_SENTENCE = re.compile(r"(\w+) (\w+) (\w+)")


class _Passage(BaseModel):
    id: str
    text: str
    score: float
    metadata: dict[str, Any]


def _text(i: int) -> str:
    return " ".join(_WORDS[(i * 7 + k * 3) % len(_WORDS)] for k in range(60))


async def _round_trips(n: int) -> int:
    """`n` tasks that each hand a value back through a future: the loop's share of the work."""
    loop = asyncio.get_running_loop()

    async def one(i: int) -> int:
        future = loop.create_future()
        loop.call_soon(future.set_result, i)
        return await future

    return sum(await asyncio.gather(*(one(i) for i in range(n))))


def work() -> int:
    """The fixed work (about 20 ms of CPU on the reference machine); returns a checksum so
    nothing of it can be skipped."""
    passages = [_Passage(id=f"doc-{i}", text=_text(i), score=1.0 / (i + 1), metadata={"source": f"s{i % 9}", "i": i})
                for i in range(300)]
    wire = json.dumps([p.model_dump() for p in passages])
    back = [_Passage.model_validate(d) for d in json.loads(wire)]
    prompt = "\n\n".join(f"[{p.id}] {p.text}" for p in sorted(back, key=lambda p: p.score))
    counts: dict[str, int] = {}
    for match in _SENTENCE.finditer(prompt):
        counts[match.group(2)] = counts.get(match.group(2), 0) + 1
    return len(prompt) + sum(counts.values()) + asyncio.run(_round_trips(2000))


def _timed_in_thread(repeats: int) -> list[float]:
    times: list[float] = []

    def run() -> None:
        # the collector held off while timed: a full collection walks the whole process's heap,
        # which is the caller's (a bench process holds far more than a fresh one), not the host
        enabled = gc.isenabled()
        for _ in range(repeats):
            gc.collect()
            gc.disable()
            try:
                start = time.thread_time()
                work()
                times.append(1000 * (time.thread_time() - start))
            finally:
                if enabled:
                    gc.enable()

    thread = threading.Thread(target=run, name="accel-host-speed-probe")
    thread.start()
    thread.join()
    return times


def _fresh_times(repeats: int) -> list[float]:
    """The timed runs in an interpreter of their own."""
    done = subprocess.run([sys.executable, "-m", "accel.benchmarks.host_speed", str(repeats)],
                          capture_output=True, text=True, timeout=120, check=True)
    return [float(ms) for ms in json.loads(done.stdout)]


def probe(repeats: int = REPEATS, *, fresh: bool = True) -> dict[str, Any]:
    """The fixed work's CPU milliseconds: median, least and most of `repeats` runs (after one
    unmeasured run that warms the imports and caches). `fresh`: in a new interpreter, since the
    caller's state is not the host's: in a bench process after its runs the same work read
    22.0-22.2 ms against 19.1-20.1 before them, the host unchanged. Where none can start, the
    probe runs here, logged."""
    if fresh:
        try:
            times = _fresh_times(repeats + 1)[1:]
        except (OSError, subprocess.SubprocessError, ValueError) as err:
            log.warning("host probe: no fresh interpreter (%r); probing in this process", err)
            fresh = False
    if not fresh:
        times = _timed_in_thread(repeats + 1)[1:]
    median = statistics.median(times)
    return {"cpu_ms": round(median, 2), "least_ms": round(min(times), 2), "most_ms": round(max(times), 2),
            "fresh": fresh, "to_reference": to_reference(median)}


def around(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """A run's host speed: the probe before and after it, and their mean (the figure quoted)."""
    cpu_ms = round((before["cpu_ms"] + after["cpu_ms"]) / 2, 2)
    return {"cpu_ms": cpu_ms, "before": before, "after": after, "reference_ms": REFERENCE_MS,
            "to_reference": to_reference(cpu_ms)}


def to_reference(cpu_ms: float) -> float | None:
    """A probe's milliseconds as a multiple of the reference machine's (None: no reference)."""
    return round(cpu_ms / REFERENCE_MS, 3) if REFERENCE_MS else None


def describe(speed: dict[str, Any] | None) -> str:
    """One phrase for a report's header: 'host probe 41.2 ms (1.08x the reference)'."""
    if not speed:
        return "host probe not run"
    ratio = f" ({speed['to_reference']:.2f}x the reference)" if speed.get("to_reference") else ""
    return f"host probe {speed['cpu_ms']:.1f} ms{ratio}"


if __name__ == "__main__":  # `probe`'s fresh interpreter: the runs' CPU milliseconds as JSON
    print(json.dumps(_timed_in_thread(int(sys.argv[1]))))
