"""The spare-capacity gate for speculative LLM work (learned prefill's warm-ups).

A warm-up is worth sending only while its LLM engine has room: with a full batch, its prefill
takes time from the requests running and gains nothing overall. `SpareGate` (one per LLM
engine of a runtime, used on the runtime's loop only) admits a group of warm-ups while the
engine's requests in flight plus the groups already admitted stay under `spare()` (the
measured `accel.profiles` figure, handed in by the session). It gates both kinds of warm-up:
learned prefill's (a program's) and the compiled graphs' (pass 3's partial prefills, the shared
heads' warm-ups), and counts what it refused (`refused`), since each refusal is a lost
optimisation.
"""

from __future__ import annotations

from collections.abc import Callable


class SpareGate:
    def __init__(self, load: Callable[[], int], spare: Callable[[], int]) -> None:
        self._load = load
        self._spare = spare
        self._groups = 0
        self.refused = 0

    def try_enter(self) -> bool:
        """Admit one group of warm-ups (it counts as load from now on, its tokenizing first),
        or say the engine has no spare capacity."""
        if self._load() + self._groups >= self._spare():
            self.refused += 1
            return False
        self._groups += 1
        return True

    def leave(self) -> None:
        self._groups -= 1
