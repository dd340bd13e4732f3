"""A stand-in for a server process, for tests of how accel finds servers by their environment.

`Popen` returns when the child's exec has closed its close-on-exec pipe, and the kernel fills in
the new program's `/proc/<pid>/environ` only later in the same exec: a reader in between sees an
empty environment (`tagged_servers` found no process once on a busy CI machine). The stand-in
says it is running once its own code runs, so its environment is in place by then."""

from __future__ import annotations

import subprocess
import sys

_WAITER = "import signal; print('running', flush=True); signal.pause()"
"""Runs until a signal ends it (the tests kill it; SIGSTOP and SIGCONT leave it waiting)."""


def started_stand_in(env: dict[str, str]) -> subprocess.Popen[str]:
    """A process group leader with exactly `env`, whose environment is readable, running until killed."""
    process = subprocess.Popen([sys.executable, "-c", _WAITER], env=env, start_new_session=True,
                               stdout=subprocess.PIPE, text=True)
    said = process.stdout.readline().strip()
    process.stdout.close()  # it says nothing more
    if said != "running":
        process.kill()
        raise RuntimeError(f"the stand-in server exited before it ran (exit code {process.wait()})")
    return process
