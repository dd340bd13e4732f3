"""The systems compared: stock sequential, stock concurrent, a LlamaDistPC-like baseline and
accel with topology-aware batching; with ablations also accel's other batching policies and
accel with each pass switched off.

A system turns the stock app (and its hand-parallelised twin) into the app it runs; building
can fail (wrap may not understand an app yet): the runner then records the failure for that
system and goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

STOCK_SEQUENTIAL = "stock-sequential"
STOCK_CONCURRENT = "stock-concurrent"
LLAMADISTPC = "llamadistpc"
ACCEL = "accel-topology"
BASELINES = (STOCK_SEQUENTIAL, STOCK_CONCURRENT, LLAMADISTPC)


@dataclass(frozen=True)
class Apps:
    """The stock app and its hand-parallelised variant, built on the same index."""

    stock: Any
    parallel: Any


@dataclass(frozen=True)
class System:
    name: str
    build: Callable[[Apps], Any]
    concurrent: bool  # False: one query at a time even in batch / online modes
    accel: bool = False
    description: str = ""


def _wrap(**options: Any) -> Callable[[Apps], Any]:
    def build(apps: Apps) -> Any:
        import accel

        return accel.wrap(apps.stock, **options)

    return build


def pass_names() -> list[str]:
    """Graph passes, then passes over what programs' runs taught (learned prefill)."""
    from accel.passes import PASSES, PROGRAM_PASSES

    return [*PASSES, *PROGRAM_PASSES]


def all_systems(*, ablations: bool = True) -> list[System]:
    """Baselines first (stock sequential is the reference for output equality), then accel;
    `ablations` adds accel's other policies and accel with each pass switched off."""
    systems = [
        System(STOCK_SEQUENTIAL, lambda apps: apps.stock, False, description="stock app, one query after another"),
        System(STOCK_CONCURRENT, lambda apps: apps.stock, True, description="stock app, batch / gather"),
        System(LLAMADISTPC, lambda apps: apps.parallel, True,
               description="stock + hand-parallelised independent modules, vLLM prefix caching on, concurrent"),
        System(ACCEL, _wrap(policy="topology"), True, True, "accel.wrap, topology-aware batching"),
    ]
    if ablations:
        systems += [
            System("accel-po", _wrap(policy="po"), True, True, "accel.wrap, per-invocation batching (PO)"),
            System("accel-to", _wrap(policy="to"), True, True, "accel.wrap, throughput-oriented FIFO batching (TO)"),
        ]
        systems += [
            System(f"accel-no-{name}", _wrap(policy="topology", disabled_passes=[name]), True, True, f"accel without {name}")
            for name in pass_names()
        ]
    return systems


def select(names: list[str] | None, *, ablations: bool = False) -> list[System]:
    """The named systems (any of all of them), or by default the baselines and accel-topology."""
    if not names:
        return all_systems(ablations=ablations)
    known = {s.name: s for s in all_systems(ablations=True)}
    unknown = [n for n in names if n not in known]
    if unknown:
        from accel.engines.errors import InvalidRequest

        raise InvalidRequest("bench", f"unknown system(s) {unknown}", f"use some of {sorted(known)}")
    return [known[n] for n in names]
