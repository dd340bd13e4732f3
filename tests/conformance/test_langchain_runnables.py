"""A drop-in must pass the framework's own tests: langchain-core's `tests/unit_tests/runnables`
(from the installed version's source distribution) runs stock, under `ACCEL_AUTO=1`
(accel-run, the README's way) and with every chain called through `accel.wrap`; any test
whose outcome differs from stock fails this test, listed with accel's failure message."""

from __future__ import annotations

from pathlib import Path

import pytest

from .runner import Suite, SuiteRun, assert_same_outcomes, check_stock, run_passes, sdist_sources

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def suite() -> Suite:
    return Suite("langchain-core runnables", sdist_sources("langchain-core", "tests/unit_tests"), "tests/unit_tests/runnables")


@pytest.fixture(scope="module")
def runs(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SuiteRun]:
    runs = run_passes(suite, ("stock", "auto", "wrapped"), tmp_path_factory.mktemp("conformance"))
    check_stock(suite, runs["stock"], least=300, passing=0.95)  # hundreds of tests, nearly all passing
    return runs


@pytest.mark.parametrize("variant", ["auto", "wrapped"])
def test_runnables_suite_outcomes_equal_stock(suite: Suite, runs: dict[str, SuiteRun], variant: str, tmp_path: Path) -> None:
    assert_same_outcomes(suite, runs, variant, tmp_path)
