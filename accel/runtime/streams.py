"""Item streams between a streaming node and its mapped consumers (decode pipelining,
micro-batches). Consumers may subscribe late: iteration replays items from the start."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any


class ItemStream:
    """Append-only items plus an end marker; waiting readers wake on each change (one future
    per change, no polling)."""

    __slots__ = ("items", "closed", "_changed")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.closed = False
        self._changed: asyncio.Future[None] | None = None

    def emit(self, item: Any) -> None:
        self.items.append(item)
        self._notify()

    def close(self) -> None:
        self.closed = True
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)

    async def __aiter__(self) -> AsyncIterator[Any]:
        seen = 0
        while True:
            if seen < len(self.items):
                seen += 1
                yield self.items[seen - 1]
            elif self.closed:
                return
            else:
                if self._changed is None:
                    self._changed = asyncio.get_running_loop().create_future()
                await asyncio.shield(self._changed)
