"""One stack per home: the lock `accel up` / `accel down` hold on `ACCEL_HOME`, and the vLLM
servers started for a home, found by a tag in their environment.

Two `accel up` at once (two shells, two test processes) used to start two vLLM servers; the
state file recorded one, and `accel down` left the other running. Now the second waits for the
first and then reports the same stack, and `down` stops every server tagged with its home,
recorded or not (an `up` killed between the launch and the state file leaves one).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

HOME_TAG = "ACCEL_STACK_HOME"
"""Environment variable a stack's vLLM servers carry: the home they were started for."""


def home_tag(home: Path) -> dict[str, str]:
    """The environment that marks a server as this home's."""
    return {HOME_TAG: str(home.resolve())}


def _open_lock(home: Path) -> int:
    home.mkdir(parents=True, exist_ok=True)
    return os.open(home / "stack.lock", os.O_RDWR | os.O_CREAT, 0o644)


def _waiting(report: Callable[[str], None]) -> None:
    report("another `accel up` or `accel down` is working on this home; waiting for it to finish")


@contextlib.asynccontextmanager
async def locked_home(home: Path, report: Callable[[str], None]) -> AsyncIterator[None]:
    """Hold the home's lock; waits (off the event loop) while another process holds it."""
    fd = _open_lock(home)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _waiting(report)
        acquiring = asyncio.ensure_future(asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX))
        try:
            await asyncio.shield(acquiring)
        except BaseException:
            # the thread still waits for the lock: let go of it once it has it
            acquiring.add_done_callback(lambda _: os.close(fd))
            raise
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def locked_home_sync(home: Path, report: Callable[[str], None]) -> Iterator[None]:
    fd = _open_lock(home)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _waiting(report)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def tagged_servers(home: Path) -> list[int]:
    """Process-group leaders started for `home` (live, from /proc)."""
    wanted = f"{HOME_TAG}={home.resolve()}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            if os.getpgid(pid) == pid and wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found
