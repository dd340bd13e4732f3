"""The A/B runner of two accel versions (benchmarks/ab.py): turn order, which tree each run
imports, and the comparison of their reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from accel.benchmarks import ab
from accel.engines.errors import InvalidRequest

REPO = Path(ab.__file__).resolve().parents[1]


def test_the_order_swaps_every_round() -> None:
    assert ab.order(3) == [(1, "base"), (1, "head"), (2, "head"), (2, "base"), (3, "base"), (3, "head")]


def _report(mode: str, systems: dict[str, tuple[float, float]]) -> dict:
    """A bench report holding, per system, its headline and front-end CPU a query."""
    def entry(seconds: float, cpu: float) -> dict:
        return {"makespan_s": seconds, "latency": {"mean": seconds / 2, "p95": seconds * 2},
                "front_end": {"process_cpu_ms_per_query": cpu}, "equal_rate": 1.0}
    return {"mode": mode, "example": "advanced-rag", "framework": "llamaindex", "headline_metric": "makespan",
            "config": {"queries": 32}, "systems": {name: entry(*values) for name, values in systems.items()}}


def test_compare_gives_medians_ranges_the_ratio_and_the_rounds_head_won() -> None:
    base = [2.30, 2.40, 2.20]
    head = [2.10, 2.45, 2.15]
    runs = [(r, side, _report("batch", {"accel-topology": (seconds, 20.0 + r)}))
            for side, values in (("base", base), ("head", head)) for r, seconds in enumerate(values, 1)]
    [row] = ab.compare(runs)
    assert row["system"] == "accel-topology"
    assert row["base"] == {"median": 2.30, "low": 2.20, "high": 2.40, "n": 3}
    assert row["head"]["median"] == 2.15
    assert row["ratio"] == pytest.approx(2.15 / 2.30)
    assert (row["head_faster"], row["paired_rounds"]) == (2, 3)  # rounds 1 and 3
    assert row["head_cpu_ms"]["median"] == 22.0
    text = ab.markdown([row], runs[0][2], "f03f8ac")
    assert "| accel-topology | 2.300 (2.200-2.400) | 2.150 (2.100-2.450) | 0.935 | 2 of 3 |" in text


def test_the_headline_follows_the_mode() -> None:
    runs = [(1, "base", _report("poisson", {"accel-topology": (1.0, 5.0)})),
            (1, "head", _report("poisson", {"accel-topology": (0.5, 5.0)}))]
    [row] = ab.compare(runs)
    assert (row["base"]["median"], row["head"]["median"]) == (2.0, 1.0)  # p95


def test_a_run_imports_accel_from_its_own_tree(tmp_path: Path) -> None:
    (tmp_path / "accel").mkdir()
    (tmp_path / "accel" / "__init__.py").write_text("")
    assert ab.imported_from(ab.Side("base", tmp_path)) == (tmp_path / "accel" / "__init__.py").resolve()


def test_a_tree_without_accel_is_refused_rather_than_run_with_another(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="would import accel from|does not import"):
        ab.imported_from(ab.Side("base", tmp_path))


def test_bench_arguments_may_not_name_the_report(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="--json"):
        ab.bench(ab.Side("head", REPO), ["advanced-rag", "--json", "x.json"], tmp_path / "r.json")


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the repository's git history")
def test_a_checked_out_revision_runs_from_its_worktree_and_is_removed_after() -> None:
    with ab.checkout("HEAD", REPO) as tree:
        assert ab.imported_from(ab.Side("base", tree)).is_relative_to(tree.resolve())
    assert not tree.exists()
    listed = subprocess.run(["git", "-C", str(REPO), "worktree", "list"], capture_output=True, text=True).stdout
    assert str(tree) not in listed


def test_an_unknown_revision_is_a_typed_error() -> None:
    with pytest.raises(InvalidRequest, match="cannot check out"):
        with ab.checkout("no-such-revision-0000", REPO):
            pass
