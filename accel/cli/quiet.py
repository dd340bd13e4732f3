"""Quiet by default: third-party progress bars and chatter (transformers' "Loading weights",
"Writing model shards", tqdm, huggingface_hub) are switched off for accel's commands, and
accel's own logs go to stderr at WARNING. `--verbose` restores the bars and shows INFO logs.

`accel.cli.main` applies this before any command imports a model library, so that tqdm, which
reads TQDM_DISABLE once at import, is covered too; commands apply it again for callers that
invoke them without `main` (Typer's test runner).
"""

from __future__ import annotations

import logging
import os
import sys

import typer

QUIET_ENV = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}
VERBOSE = typer.Option(False, "--verbose", help="Show third-party progress bars and accel's info logs.")


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time, so lines logged while a rich progress
    display redirects stderr are printed above it instead of through it."""

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self):  # noqa: D401 - logging's attribute
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _handler(logger: logging.Logger, level: int) -> None:
    handler = next((h for h in logger.handlers if isinstance(h, _Stderr)), None)
    if handler is None:
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    handler.setLevel(level)


def configure(verbose: bool) -> None:
    """Apply the quiet (default) or verbose set-up; safe to call more than once. accel's own
    warnings always show; other libraries' warnings only with --verbose (errors always)."""
    accel_logger = logging.getLogger("accel")
    accel_logger.propagate = False
    accel_logger.setLevel(logging.INFO if verbose else logging.WARNING)
    _handler(accel_logger, logging.NOTSET)
    _handler(logging.getLogger(), logging.WARNING if verbose else logging.ERROR)
    if verbose:
        return
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)  # also read by the processes accel starts
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
