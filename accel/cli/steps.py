"""accel's own long steps, one line each on stderr: a spinner while a step runs, a tick and its
time when it is done (in a terminal); elsewhere (logs, CI) one line when each step ends.

    with Steps(console) as steps:
        steps.step("starting the vLLM server")   # ends the previous step, starts this one
        ...
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text


class Steps:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._current: str | None = None
        self._began = 0.0

    def __enter__(self) -> Steps:
        if self.console.is_terminal:
            self._progress = Progress(SpinnerColumn(finished_text="[green]✓[/]"), TextColumn("{task.description}"),
                                      TimeElapsedColumn(), console=self.console)
            self._progress.start()
        return self

    def step(self, description: str) -> None:
        """End the running step (if any) and start `description`."""
        self._finish(failed=False)
        self._current, self._began = description, time.perf_counter()
        if self._progress is not None:
            self._task = self._progress.add_task(description, total=1)

    def _finish(self, failed: bool) -> None:
        if self._current is None:
            return
        if self._progress is not None and self._task is not None:
            if failed:
                self._progress.update(self._task, description=f"[red]✗ failed:[/] {self._current}")
                self._progress.stop_task(self._task)
            else:
                self._progress.update(self._task, completed=1)
        else:
            mark = "✗ failed:" if failed else "✓"
            self.console.print(Text(f"{mark} {self._current} ({time.perf_counter() - self._began:.1f} s)"))
        self._current, self._task = None, None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._finish(failed=exc_type is not None)
        if self._progress is not None:
            self._progress.stop()
