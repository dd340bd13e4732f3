"""`operator.itemgetter` as a local op, and the positional window that lets a slice of a list
run on each slice of a stream.

Apps cut generated lists with `itemgetter(slice(0, n))` after a list parser (LangChain's
multi-query recipes). The getter is a pure function the framework calls on the whole value;
`GetItemOp` calls the same getter, so results and errors are the stock ones. When the getter is
one slice with step 1 and bounds that do not count from the end, the element at position j of
the output is the element at position j + start of the input, whatever follows it: the op is
`positional`, and run on one slice of the input at a known element offset it returns that
slice's part of the output. Decode pipelining then maps it over a streaming decode, so the first
kept items go downstream while the model still writes the rest.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

ITEM_OFFSET = "#offset"
"""The values key under which the runtime hands a positional op mapped over a stream the
element offset of its slice (the count of elements in the stream's items before it)."""


def getter_keys(fn: Any) -> tuple[Any, ...] | None:
    """The keys of an `operator.itemgetter`, or None for any other callable."""
    if type(fn) is not operator.itemgetter:
        return None
    _, keys = fn.__reduce__()
    return tuple(keys)


def prefix_window(keys: tuple[Any, ...]) -> tuple[int, int | None] | None:
    """(start, stop) when the keys are one slice that keeps a window counted from the front
    (step 1, no negative bounds), else None: only then is each output element known from the
    elements before it."""
    if len(keys) != 1 or type(keys[0]) is not slice:
        return None
    cut = keys[0]
    bounds = (cut.start, cut.stop)
    if cut.step not in (None, 1) or any(b is not None and (type(b) is not int or b < 0) for b in bounds):
        return None
    return (cut.start or 0, cut.stop)


@dataclass(frozen=True)
class GetItemOp:
    """`getter(values["value"])`: the stock getter on the whole value. With `window` set
    (`prefix_window` of the getter's keys), a slice arriving with `ITEM_OFFSET` gives the
    elements of the window that lie in that slice."""

    getter: Any
    window: tuple[int, int | None] | None = None
    blocking: bool = False

    @property
    def positional(self) -> bool:
        return self.window is not None

    def compute(self, values: dict[str, Any]) -> Any:
        value = values["value"]
        offset = values.get(ITEM_OFFSET)
        if offset is None or self.window is None:
            return self.getter(value)
        start, stop = self.window
        return [item for at, item in enumerate(value, offset) if at >= start and (stop is None or at < stop)]

    def describe(self) -> str:
        keys = getter_keys(self.getter) or ()
        return f"operator.itemgetter({', '.join(map(repr, keys))})"
