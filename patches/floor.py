"""Engine-call capture process-wide under `ACCEL_AUTO=1`: the floor's plug-ins are installed
and route framework components' engine calls through accel from any code, not only from
inside wrapped runs (each call outside a wrapped app is a program of its own)."""

from __future__ import annotations

from accel.adapters.common import floor


def patch() -> None:
    floor.install()
    floor.set_auto(True)


def unpatch() -> None:
    floor.set_auto(False)
    floor.uninstall()


def patched() -> bool:
    return floor.installed() and floor.route._auto["on"]
