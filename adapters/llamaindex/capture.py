"""Engine-call capture (the floor) for LlamaIndex components: which ones send their engine
work through accel's shared engine schedulers when called inside a wrapped run."""

from __future__ import annotations

from typing import Any


def capturing(component: Any) -> bool:
    """Whether `component`'s engine calls are captured during a wrapped run."""
    return False
