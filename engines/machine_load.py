"""How much of the machine other processes use: a profile measured beside other work is wrong.

`accel profile` times engines on this machine, and the runtime sizes its calls from what it
measured. On a machine where another job takes the cores (a test run, a build), the engines
read 25-30% slower at large batches (docs/benchmarks-twin.md: a twin's chunk embedder read
773 texts/s at 64 under load against 975 quietly), and every later run is sized from that.

`measure` reads the kernel's CPU counters (`/proc/stat`) over a short window and subtracts
this process's own CPU time, so what is left is the other processes' use, in cores. It is
taken while the engines being profiled are idle (before and after a sweep), so their own work
does not count. Where `/proc/stat` does not exist (macOS), it returns None: not measured.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

QUIET_BUSY_CORES = 0.5
"""Other processes' CPU, in cores, above which a measurement is called busy: half a core is
more than an idle desktop or an idle engine server uses, and less than any job that would move
a profile (one busy core is half of the reference machine)."""

PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class MachineLoad:
    """Other processes' CPU over one window, in cores (1.0: one core kept busy)."""

    busy_cores: float
    cores: int
    window_s: float

    @property
    def quiet(self) -> bool:
        return self.busy_cores <= QUIET_BUSY_CORES

    def describe(self) -> str:
        return f"{self.busy_cores:.1f} of {self.cores} cores in use by other processes"


def read_cpu_seconds(path: Path = PROC_STAT) -> float | None:
    """Seconds of CPU all cores spent busy since boot (the `cpu` line of /proc/stat, less idle
    and iowait), or None where the file does not exist."""
    try:
        first = path.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu":
        return None
    ticks = [int(value) for value in first[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def measure(
    window_s: float = 1.0,
    *,
    read: Callable[[], float | None] = read_cpu_seconds,
    own: Callable[[], float] = time.process_time,
    wait: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> MachineLoad | None:
    """Other processes' CPU over `window_s` (this process's own CPU, all its threads, left out);
    None where the machine has no /proc/stat. The window is a measurement, not a wait for
    anything: the caller's engines are idle during it."""
    busy_before, own_before, began = read(), own(), clock()
    if busy_before is None:
        return None
    await wait(window_s)
    busy_after, own_after, ended = read(), own(), clock()
    if busy_after is None or ended <= began:
        return None
    others = max(0.0, (busy_after - busy_before) - (own_after - own_before))
    return MachineLoad(others / (ended - began), os.cpu_count() or 1, ended - began)
