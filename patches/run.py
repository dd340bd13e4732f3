"""`accel-run python app.py`: run a command with accel auto-instrumentation switched on.

Like `opentelemetry-instrument`: put the bootstrap directory (a sitecustomize) first on
PYTHONPATH, set ACCEL_AUTO=1, and exec the command.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap"


def environment(base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    paths = [str(BOOTSTRAP), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["ACCEL_AUTO"] = "1"
    return env


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: accel-run COMMAND [ARGS...]   e.g. accel-run python app.py", file=sys.stderr)
        raise SystemExit(2)
    program = shutil.which(args[0])
    if program is None:
        print(f"accel-run: command not found: {args[0]}", file=sys.stderr)
        raise SystemExit(127)
    os.execve(program, args, environment(dict(os.environ)))


if __name__ == "__main__":
    main()
