"""Shared helpers for runtime tests: a virtual-time event loop and small graph builders.

`run_virtual(coro)` runs a coroutine on an event loop whose clock jumps straight to the next
timer whenever nothing is ready, so fake engines' latencies (`asyncio.sleep`) cost no wall time
and orderings/completion times are deterministic, not subject to machine noise.
"""

from __future__ import annotations

import asyncio
import selectors

import pytest


class _JumpingSelector(selectors.DefaultSelector):
    loop: VirtualTimeLoop

    def select(self, timeout=None):
        if timeout is None:
            return super().select(None)
        events = super().select(0)
        if not events and timeout > 0:
            self.loop.now += timeout
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        self.now = 0.0
        selector.loop = self

    def time(self) -> float:
        return self.now


def run_virtual(coro):
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


@pytest.fixture
def virtual():
    return run_virtual
