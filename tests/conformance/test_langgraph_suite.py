"""A drop-in must pass the framework's own tests: LangGraph's `tests/`, and langgraph-prebuilt's
(ToolNode, the ReAct agent: their sync tools run through accel's `run_in_executor` in wrapped
runs), each from the installed version's source distribution, run stock, under `ACCEL_AUTO=1`
and with every compiled graph `accel.wrap`ped; any test whose outcome differs from stock fails.
The checkpointer, store and cache variants that need Docker (Postgres, Redis) are off through
the suite's own switch, `NO_DOCKER=true`; the in-memory and SQLite ones run."""

from __future__ import annotations

from pathlib import Path

import pytest

from .runner import Suite, SuiteRun, assert_same_outcomes, check_stock, run_passes, sdist_sources

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

LEAST_TESTS = {"langgraph": 2500, "langgraph-prebuilt": 200}
"""How many tests each suite runs stock at least (thousands, and a few hundred), nearly all passing."""


@pytest.fixture(scope="module", params=sorted(LEAST_TESTS))
def suite(request: pytest.FixtureRequest) -> Suite:
    return Suite(request.param, sdist_sources(request.param, "tests"), "tests", env={"NO_DOCKER": "true"}, wrap="graphs")


@pytest.fixture(scope="module")
def runs(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SuiteRun]:
    runs = run_passes(suite, ("stock", "auto", "wrapped"), tmp_path_factory.mktemp("conformance"))
    check_stock(suite, runs["stock"], least=LEAST_TESTS[suite.name], passing=0.95)
    return runs


@pytest.mark.parametrize("variant", ["auto", "wrapped"])
def test_langgraph_suite_outcomes_equal_stock(suite: Suite, runs: dict[str, SuiteRun], variant: str, tmp_path: Path) -> None:
    assert_same_outcomes(suite, runs, variant, tmp_path)
