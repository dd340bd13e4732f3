"""A broken optional import names itself: `accel bench` stays listed and says what failed."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
sys.modules["accel.benchmarks"] = None  # as if the harness failed to import
from typer.testing import CliRunner
from accel.cli import app
result = CliRunner().invoke(app, ["bench", "advanced-rag"])
print(result.exit_code)
print(result.output)
"""


def test_bench_says_why_it_is_unavailable() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    code, _, output = done.stdout.partition("\n")
    assert code == "2"
    assert "accel bench: unavailable because an import failed" in output and "accel.benchmarks" in output
    assert "Remedy" in output
