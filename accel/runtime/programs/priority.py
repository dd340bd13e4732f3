"""Program-aware LLM priorities (Autellix): every wrapped run is a program.

Where the program's structure is known (a LangGraph graph), a request's priority is the
remaining depth of the node making it: the longest path from that node to the end, so a run
close to finishing is served before runs that have just started (shortest remaining work
first, which shortens the queue of nearly finished runs that makes the tail). Elsewhere it is
least attained service (PLAS): the program that has had the least LLM time goes first, on a
log scale of `QUANTUM_S` levels so a long program sinks gradually. Lower runs first (vLLM's
convention); the LLM engine sends priorities only to a server that schedules by them.

`Priorities(enabled=False)` (the session's `Settings.program_priority` off) sends every
program's calls at priority 0, the baseline the benchmarks compare against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accel.scope import WrappedRun

QUANTUM_S = 0.25
"""The first PLAS level's LLM time; each further level doubles it."""
MAX_LEVEL = 16


def plas_level(attained_s: float) -> int:
    """0 for a program that has had less than one quantum of LLM time, then +1 per doubling."""
    if attained_s < QUANTUM_S:
        return 0
    return min(MAX_LEVEL, 1 + int(math.log2(attained_s / QUANTUM_S)))


@dataclass(frozen=True)
class Priorities:
    """The priority of a program's next LLM request."""

    enabled: bool = True

    def of(self, run: WrappedRun) -> int:
        if not self.enabled:
            return 0
        if run.remaining_depth is not None:
            depth = run.remaining_depth()
            if depth is not None:
                return depth
        return plas_level(run.attained_s)
