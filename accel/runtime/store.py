"""Per-query object store: intermediate values live only while a consumer still needs them.

Each value is stored with the number of consumers that will read it; a consumer releases the
value once it has resolved its inputs, and the last release frees it. So a long query keeps
only its frontier in memory, and 1,000 concurrent queries do not hold every intermediate list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ObjectStore:
    """Values by node index, freed after their last reader (the `keep` node is never freed)."""

    __slots__ = ("_values", "_readers", "_keep")

    def __init__(self, readers: Sequence[int], keep: int) -> None:
        self._values: dict[int, Any] = {}
        self._readers = list(readers)
        self._keep = keep

    def put(self, index: int, value: Any) -> None:
        """Store a node's value, unless nobody is left to read it."""
        if self._readers[index] > 0 or index == self._keep:
            self._values[index] = value

    def get(self, index: int) -> Any:
        return self._values[index]

    def release(self, index: int) -> None:
        """One reader of `index` is done with it."""
        self._readers[index] -= 1
        if self._readers[index] <= 0 and index != self._keep:
            self._values.pop(index, None)

    def __len__(self) -> int:
        """Values held now."""
        return len(self._values)
