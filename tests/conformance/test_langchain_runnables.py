"""A drop-in must pass the framework's own tests: langchain-core's `tests/unit_tests/runnables`
(from the installed version's source distribution) runs stock, under `ACCEL_AUTO=1`
(accel-run, the README's way) and with every chain called through `accel.wrap`; any test
whose outcome differs from stock fails this test, listed with accel's failure message."""

from __future__ import annotations

from pathlib import Path

import pytest

from .runner import SuiteRun, differences, langchain_core_sources, run_suite

TARGET = "tests/unit_tests/runnables"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def source() -> Path:
    return langchain_core_sources()


@pytest.fixture(scope="module")
def stock(source: Path, tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    run = run_suite(source, TARGET, "stock", tmp_path_factory.mktemp("conformance") / "stock.xml")
    # the suite really ran: hundreds of tests, nearly all passing stock
    assert len(run.outcomes) >= 300, run.output_tail
    assert sum(o == "passed" for o in run.outcomes.values()) >= 0.95 * len(run.outcomes), run.output_tail
    return run


@pytest.mark.parametrize("variant", ["auto", "wrapped"])
def test_runnables_suite_outcomes_equal_stock(source: Path, stock: SuiteRun, variant: str, tmp_path: Path) -> None:
    accel_run = run_suite(source, TARGET, variant, tmp_path / f"{variant}.xml")
    diff = differences(stock, accel_run)
    assert not diff, f"{len(diff)} of {len(stock.outcomes)} tests differ under {variant}:\n" + "\n".join(diff)
