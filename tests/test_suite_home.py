"""The suite runs on the documented limits whatever the user's ACCEL_HOME holds (tests/conftest.py)."""

from __future__ import annotations

import os

from accel import profiles
from accel.config import settings
from tests.conftest import SUITE_HOME


def test_the_suite_has_its_own_home_sharing_only_the_built_models() -> None:
    cfg = settings()
    assert cfg.home == SUITE_HOME and os.environ["ACCEL_HOME"] == str(SUITE_HOME)
    assert cfg.models_dir.is_symlink() and cfg.models_dir.resolve() != (SUITE_HOME / "models").absolute()


def test_the_suite_reads_the_documented_limits() -> None:
    assert profiles.load().source.startswith("documented defaults")
