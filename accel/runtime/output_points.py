"""Where a streamed query's output comes from while it runs: the Decodes whose text streams
(the output's own, the text a streamed list is parsed from, or an output dict's parts) and the
nodes whose values are output dict parts (`Plan.parts`, `accel.ir.output_parts`). A query's
graph scheduler hands them each delta and each finished value; they make the stream's
`Delta`s and `Part`s."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from accel.ir.output_parts import DictPart
from accel.runtime.plan import Plan
from accel.types import Delta, Part, StreamItem


class OutputPoints:
    """One streamed query's output points, decided from its plan."""

    def __init__(self, plan: Plan, on_item: Callable[[StreamItem], None]) -> None:
        self.plan = plan
        self.on_item = on_item
        self.taps: dict[int, tuple[tuple[str, ...], ...]] = {}
        """Decode index -> the output paths its deltas go to (() is the output itself)."""
        self.parts_at: dict[int, tuple[DictPart, ...]] = {}
        """Node index -> the output dict parts its value makes."""
        if not plan.parts:
            source = plan.text_source if plan.text_source >= 0 else plan.item_source
            if source >= 0:
                self.taps[source] = ((),)
        for part, source in zip(plan.parts, plan.part_texts, strict=True):
            if source >= 0:
                self.taps[source] = (*self.taps.get(source, ()), part.path)
            self.parts_at[part.node] = (*self.parts_at.get(part.node, ()), part)

    def delta(self, i: int, text: str) -> None:
        for path in self.taps[i]:
            self.on_item(Delta(text, path))

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
