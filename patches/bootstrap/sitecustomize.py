"""Loaded at interpreter start by `accel-run` (this directory is put first on PYTHONPATH)."""

from accel.patches import instrument

instrument()
