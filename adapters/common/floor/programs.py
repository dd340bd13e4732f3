"""Program-aware LLM priorities (Autellix): every wrapped run is a program.

Where the program's structure is known (a LangGraph graph), a request's priority is the
remaining depth of the node making it: the longest path from that node to the end, so a run
close to finishing is served before runs that have just started (shortest remaining work
first, which shortens the queue of nearly finished runs that makes the tail). Elsewhere it is
least attained service (PLAS): the program that has had the least LLM time goes first, on a
log scale of `QUANTUM_S` levels so a long program sinks gradually. Lower runs first (vLLM's
convention); the LLM engine sends priorities only to a server that schedules by them.

`set_enabled(False)` (or `ACCEL_PROGRAM_PRIORITY=0`) sends every captured call at priority 0,
the baseline the benchmarks compare against.
"""

from __future__ import annotations

import math
from typing import Any

from accel.config import settings

QUANTUM_S = 0.25
"""The first PLAS level's LLM time; each further level doubles it."""
MAX_LEVEL = 16

_state = {"enabled": settings().program_priority}


def set_enabled(on: bool) -> None:
    """Switch program-aware priorities on or off for this process (benchmarks, A/B runs)."""
    _state["enabled"] = bool(on)


def enabled() -> bool:
    return _state["enabled"]


def plas_level(attained_s: float) -> int:
    """0 for a program that has had less than one quantum of LLM time, then +1 per doubling."""
    if attained_s < QUANTUM_S:
        return 0
    return min(MAX_LEVEL, 1 + int(math.log2(attained_s / QUANTUM_S)))


def priority(run: Any) -> int:
    """The priority of the next LLM request of `run` (a `WrappedRun`)."""
    if not enabled():
        return 0
    if run.remaining_depth is not None:
        depth = run.remaining_depth()
        if depth is not None:
            return depth
    return plas_level(run.attained_s)
