"""A drop-in must pass the framework's own tests: the llama-index-core unit tests kept beside
the repository (`../shared/peer-tests/llama-index-core`, see its README) run stock and under
`ACCEL_AUTO=1`; any test whose outcome differs fails this test. The folder is read-only and
only some checkouts have it: the suite runs from a writable copy, and is skipped without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .runner import ROOT, Suite, SuiteRun, assert_same_outcomes, check_stock, run_passes, writable_copy

PEER_TESTS = ROOT.parent / "shared" / "peer-tests" / "llama-index-core"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Suite, dict[str, SuiteRun]]:
    if not (PEER_TESTS / "tests").is_dir():
        pytest.skip(f"no llama-index-core peer tests at {PEER_TESTS} (a clone without the shared folder beside it)")
    folder = tmp_path_factory.mktemp("conformance")
    suite = Suite("llama-index-core peer tests", writable_copy(PEER_TESTS, folder / "llama-index-core"), "tests")
    runs = run_passes(suite, ("stock", "auto"), folder)
    # the subset's 265 tests; about 10% fail stock through version skew (its README)
    check_stock(suite, runs["stock"], least=200, passing=0.8)
    return suite, runs


def test_llama_index_peer_outcomes_equal_stock(runs: tuple[Suite, dict[str, SuiteRun]], tmp_path: Path) -> None:
    suite, by_variant = runs
    assert_same_outcomes(suite, by_variant, "auto", tmp_path)
