"""accel's own progress lines outside a terminal (logs, CI, `make run | tee`): one line per
step when it ends, lanes that run side by side (the LLM server starting while documents are
indexed), and a failed step marked as such."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console

from accel.cli.steps import Steps


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=False, width=80), buffer


def test_one_line_per_step_when_it_ends_and_lanes_overlap() -> None:
    console, buffer = _console()
    with Steps(console) as steps:
        steps.step("resolving the LLM")
        worker = threading.Thread(target=lambda: steps.step("starting the vLLM server", lane="stack"))
        worker.start()
        worker.join()
        steps.step("indexing 12 documents")  # ends "resolving the LLM" only
        steps.end("stack")
        steps.step("stock-sequential")
    lines = buffer.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "✓ resolving the LLM", "✓ starting the vLLM server", "✓ indexing 12 documents", "✓ stock-sequential"]
    assert all(line.endswith(" s)") for line in lines)


def test_a_step_interrupted_by_an_error_is_marked_failed() -> None:
    console, buffer = _console()
    with pytest.raises(RuntimeError), Steps(console) as steps:
        steps.step("starting the vLLM server")
        raise RuntimeError("server exited")
    assert buffer.getvalue().startswith("✗ failed: starting the vLLM server (")
