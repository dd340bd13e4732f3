"""Where a captured component call goes: the wrapped run it belongs to (`active_run`), the
session serving that run (`session_of`; the session makes each call one task of the run's
program), and the floor's counters of routed, stock and fallback calls.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accel.scope import WrappedRun, current_run, in_stock_call

if TYPE_CHECKING:
    from accel.session import Session

log = logging.getLogger("accel.floor")

_auto = {"on": False}


def set_auto(on: bool) -> None:
    """`ACCEL_AUTO=1`: capture engine calls process-wide, not only inside wrapped runs."""
    _auto["on"] = bool(on)


def active_run() -> WrappedRun | None:
    """The program a component call belongs to, or None when it must run as stock: outside
    any wrapped run (unless auto), or inside `stock_call()` (a wrapped app's stock fallback)."""
    if in_stock_call():
        return None
    run = current_run()
    if run is None and _auto["on"]:
        run = WrappedRun(app="auto")  # a call outside any wrapped app is a program of its own
    return run


# ---- counters (explain / tests): routed, stock (why), fallback (engine error) ----------------


@dataclass
class Stats:
    routed: Counter = field(default_factory=Counter)
    stock: Counter = field(default_factory=Counter)
    fallback: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, name: str, key: Any) -> bool:
        """Count one event; True the first time this key is seen (log it once)."""
        with self._lock:
            counter: Counter = getattr(self, name)
            counter[key] += 1
            return counter[key] == 1

    def snapshot(self) -> dict[str, dict[Any, int]]:
        with self._lock:
            return {"routed": dict(self.routed), "stock": dict(self.stock), "fallback": dict(self.fallback)}

    def reset(self) -> None:
        with self._lock:
            self.routed.clear()
            self.stock.clear()
            self.fallback.clear()


stats = Stats()


def note_stock(component: str, reason: str) -> None:
    """A captured component ran its own code for this call (an option accel does not map)."""
    if stats.count("stock", (component, reason)):
        log.info("%s runs as stock: %s", component, reason)


def note_fallback(component: str, err: BaseException) -> None:
    """An accel engine failed before serving the call; the component's own code serves it."""
    if stats.count("fallback", (component, type(err).__name__)):
        log.warning("%s fell back to its own code after an accel engine error: %s", component, err)


# ---- the session ---------------------------------------------------------------------------


def session_of(run: WrappedRun) -> Session:
    """The session serving `run`: the wrapped app's own, else the process-wide one."""
    if run.session is not None:
        return run.session
    from accel.session import get_session

    return get_session()
