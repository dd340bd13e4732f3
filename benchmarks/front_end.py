"""What one front-end process spends per query, in CPU time: the figure that says where one
front-end saturates once the engines are fast (GPUs, or engine twins modelling them).

Measured as CPU time, not wall time, so it holds on a busy machine: the process's CPU time
over a system's run (app threads, callbacks, accel's loop, the engine clients), and for accel
the session loop thread's own. Both are per query. A Python process runs one thread at a time
under the GIL, so `1 / process CPU per query` is the most queries per second that one
front-end can serve, whatever its cores; accel's loop saturates first if its own share alone
reaches one core. Engines in their own processes (vLLM, pooling servers, twins, Postgres) are
not counted; in-process encoders are, and the report says so.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

LOOP_THREAD = "accel-session"


@dataclass(frozen=True)
class CpuSample:
    process_s: float
    loop_s: float | None
    loop_ident: int | None


def _loop_thread() -> threading.Thread | None:
    return next((t for t in threading.enumerate() if t.name == LOOP_THREAD and t.is_alive()), None)


def _thread_cpu_s(ident: int) -> float | None:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, AttributeError):  # the thread ended, or no per-thread clocks here
        return None


def sample(thread: threading.Thread | None = None, *, loop: bool = True) -> CpuSample:
    """This process's CPU time so far, and the loop thread's (`thread`, by default accel's
    session loop when one runs: the harness shuts sessions down between systems, so there is
    one at most). `loop=False` for a stock system: a session left idle by the bound's probes is
    not its loop (it read 0.0 ms a query where stock has no loop at all)."""
    if not loop:
        return CpuSample(time.process_time(), None, None)
    thread = thread or _loop_thread()
    ident = thread.ident if thread is not None else None
    return CpuSample(time.process_time(), _thread_cpu_s(ident) if ident is not None else None, ident)


def per_query(before: CpuSample | None, after: CpuSample | None, queries: int, *,
              in_process_encoders: bool, app_loop_busy_s: float | None = None) -> dict[str, Any] | None:
    """CPU milliseconds per query between two samples, and the rate that saturates one
    front-end; None without both samples or queries. `app_loop_busy_s`: wall seconds the
    app's own event loop ran code during the run (where the apps share one: LlamaIndex's
    concurrent batch), a floor under that run's makespan that no engine speed lowers."""
    if before is None or after is None or queries <= 0:
        return None
    process_ms = 1000 * (after.process_s - before.process_s) / queries
    loop_ms = None
    if before.loop_ident is not None and before.loop_ident == after.loop_ident and None not in (before.loop_s, after.loop_s):
        loop_ms = 1000 * (after.loop_s - before.loop_s) / queries  # type: ignore[operator]
    return {
        "process_cpu_ms_per_query": round(process_ms, 3),
        "loop_cpu_ms_per_query": None if loop_ms is None else round(loop_ms, 3),
        "saturates_at_qps": round(1000 / process_ms, 1) if process_ms > 0 else None,
        "includes_in_process_encoders": in_process_encoders,
        "app_loop_busy_s": None if app_loop_busy_s is None else round(app_loop_busy_s, 3),
    }
