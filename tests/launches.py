"""`BackgroundLaunch`: a test server started in a thread of its own, so its start overlaps the
tests that run first (tests/conftest.py starts the session's servers once collection ends)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Generic, TypeVar

H = TypeVar("H")


class BackgroundLaunch(Generic[H]):
    """`start(scratch)` running now in its own thread, with a fresh scratch directory (the
    server's home or log); `stop` ends what it started, once, and removes the directory."""

    def __init__(self, name: str, start: Callable[[Path], H], stop: Callable[[H], None]) -> None:
        self._scratch = Path(tempfile.mkdtemp(prefix=f"accel-test-{name}-"))
        self._stop: Callable[[H], None] | None = stop
        pool = ThreadPoolExecutor(1, thread_name_prefix=f"{name}-launch")
        self._future: Future[H] = pool.submit(start, self._scratch)
        pool.shutdown(wait=False)

    def result(self) -> H:
        """The server's handle, once it is up (raises what the launch raised)."""
        return self._future.result()

    def stop(self) -> None:
        """Stop the server (waiting for a launch under way); later calls do nothing."""
        stop, self._stop = self._stop, None
        if stop is None:
            return
        try:
            handle = self._future.result()
        except Exception:
            pass  # the launch failed: the fixture that asked for it raised that already
        else:
            stop(handle)
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)
