"""accel's own long steps, one line each on stderr: a spinner while a step runs, a tick and its
time when it is done (in a terminal); elsewhere (logs, CI) one line when each step ends.

    with Steps(console) as steps:
        steps.step("starting the vLLM server", lane="stack")  # from a worker thread
        steps.step("indexing 12 documents")                    # meanwhile, on the main lane
        steps.end("stack")                                     # the server is ready

Each lane runs one step at a time: starting a step ends that lane's previous one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

MAIN = "main"


@dataclass
class _Running:
    description: str
    began: float
    task: TaskID | None


class Steps:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Progress | None = None
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> Steps:
        if self.console.is_terminal:
            self._progress = Progress(SpinnerColumn(finished_text="[green]✓[/]"), TextColumn("{task.description}"),
                                      TimeElapsedColumn(), console=self.console)
            self._progress.start()
        return self

    def step(self, description: str, lane: str = MAIN) -> None:
        """End `lane`'s running step (if any) and start `description` on it."""
        with self._lock:
            self._end(lane, failed=False)
            task = self._progress.add_task(description, total=1) if self._progress is not None else None
            self._running[lane] = _Running(description, time.perf_counter(), task)

    def end(self, lane: str = MAIN, *, failed: bool = False) -> None:
        with self._lock:
            self._end(lane, failed)

    def _end(self, lane: str, failed: bool) -> None:
        running = self._running.pop(lane, None)
        if running is None:
            return
        if self._progress is not None and running.task is not None:
            if failed:
                self._progress.update(running.task, description=f"[red]✗ failed:[/] {running.description}")
                self._progress.stop_task(running.task)
            else:
                self._progress.update(running.task, completed=1)
            return
        mark = "✗ failed:" if failed else "✓"
        self.console.print(Text(f"{mark} {running.description} ({time.perf_counter() - running.began:.1f} s)"))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        with self._lock:
            for lane in list(self._running):
                self._end(lane, failed=exc_type is not None)
        if self._progress is not None:
            self._progress.stop()
