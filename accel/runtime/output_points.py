"""Where a streamed query's output comes from while it runs: the Decodes whose text streams
(the output's own, the text a streamed list is parsed from, or an output dict's parts) and the
nodes whose values are output dict parts (`Plan.parts_at`, `accel.ir.output_parts`). A query's
graph scheduler hands them each delta and each finished value; they make the stream's
`Delta`s and `Part`s."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from accel.runtime.plan import Plan
from accel.types import Delta, Part, StreamItem


class OutputPoints:
    """One streamed query's output points: its plan's (`Plan.output_taps`, `Plan.parts_at`,
    decided once per template), and where their items go."""

    def __init__(self, plan: Plan, on_item: Callable[[StreamItem], None]) -> None:
        self.plan = plan
        self.on_item = on_item
        self.taps = plan.output_taps
        self.parts_at = plan.parts_at

    def delta(self, i: int, text: str, *, last: bool = False) -> None:
        for path in self.taps[i]:
            self.on_item(Delta(text, path, last))

    def finished(self, i: int, value: Any) -> None:
        """Node i made its output parts: each goes out now (a merged dict without the keys a
        later part provides; a value that is no dict is left to the query's value)."""
        if self.plan.produces_stream[i] or self.plan.mapped_src[i] >= 0:
            value = list(itertools.chain.from_iterable(value))
        for part in self.parts_at[i]:
            item = value if part.key is None else value[part.key]
            if not part.merge:
                self.on_item(Part(part.path, item))
            elif isinstance(item, dict):
                self.on_item(Part(part.path, {k: v for k, v in item.items() if k not in part.exclude}, merge=True))
