"""The twin suite's table (benchmarks/twin_suite.py): accel against the better stock system and
the bound, every number labelled simulated, and nothing published before validation passes."""

from __future__ import annotations

import json
from pathlib import Path

from accel.benchmarks.twin_suite import TABLE_END, TABLE_START, TITLE, markdown, publish, row, saturation_rate, suite, validated


LAGS = {"stock-sequential": 0.02, "stock-concurrent": 0.05, "accel-topology": 0.01}


def report(mode: str, stock: float, concurrent: float, accel: float, bound: dict | None = None) -> dict:
    key = "p95" if mode == "poisson" else "mean"
    times = {"stock-sequential": stock, "stock-concurrent": concurrent, "accel-topology": accel}
    return {"example": "advanced-rag", "framework": "langchain", "mode": mode, "config": {"queries": 32},
            "systems": {n: {"latency": {key: t / 32 if mode == "batch" and n == "stock-sequential" else t},
                            "makespan_s": t if mode == "batch" else None, "equal_rate": 1.0, "throughput_qps": 32 / t,
                            "twin_lag_s": LAGS[n]}
                        for n, t in times.items()},
            "bound": bound, "simulated": {"twin_lag_s": 0.12}}


def test_accel_is_compared_with_the_better_stock_and_the_bound() -> None:
    r = row(report("batch", 20.0, 8.0, 5.0, {"value_s": 4.5, "accel_over_bound": 5.0 / 4.5}))
    assert (r["better_stock"], r["speedup"], r["bound_s"]) == ("stock-concurrent", 1.6, 4.5)
    # a batch compares makespans: stock-sequential's mean latency is one query's (20 / 32 s here)
    alone = row(report("batch", 20.0, 30.0, 5.0))
    assert (alone["better_stock"], alone["stock_s"], alone["speedup"]) == ("stock-sequential", 20.0, 4.0)
    assert r["accel_over_bound"] == 5.0 / 4.5 and r["twin_lag_s"] == 0.12
    assert (r["stock_lag_s"], r["accel_lag_s"]) == (0.05, 0.01)  # each system's own lag, the better stock's
    assert (r["stock_llm_busy"], r["accel_llm_busy"]) == (None, None)  # no twin_busy_s in these reports
    r["stock_llm_busy"], r["accel_llm_busy"] = 0.8, 0.99
    assert "| 80% / 99% | n/a / n/a |" in markdown([r], "simulated from measured H100 curves", validated=True)
    stepped = report("batch", 20.0, 8.0, 5.0)  # the LLM twin's steps, summarised per system
    stepped["systems"]["stock-concurrent"]["llm_steps"] = {"floor_s": 3.0, "busy_s": 6.0}
    stepped["systems"]["accel-topology"]["llm_steps"] = {"floor_s": 2.0, "busy_s": 5.0}
    assert (row(stepped)["stock_llm_floor"], row(stepped)["accel_llm_floor"]) == (0.5, 0.4)
    assert "| 50% / 40% |" in markdown([row(stepped)], "simulated", validated=True)
    poisson = row(report("poisson", 3.0, 2.0, 1.0, {"value_s": 0.9, "established": False}))
    assert poisson["speedup"] == 2.0 and poisson["bound_s"] is None  # an unestablished bound is no bound


def test_poisson_runs_at_stocks_saturation_rate() -> None:
    assert saturation_rate(report("batch", 20.0, 8.0, 5.0)) == 4.0


def test_every_table_is_labelled_and_an_unvalidated_one_says_so(tmp_path: Path) -> None:
    rows = [row(report("single", 2.0, 2.0, 1.5))]
    unvalidated = markdown(rows, "simulated from measured H100 curves", validated=False)
    assert "NOT VALIDATED" in unvalidated and "simulated from measured H100 curves" in unvalidated
    assert "NOT VALIDATED" not in markdown(rows, "simulated from measured H100 curves", validated=True)
    summary = tmp_path / "summary.json"
    assert not validated(None) and not validated(summary)
    summary.write_text(json.dumps({"passed": False}))
    assert not validated(summary)
    summary.write_text(json.dumps({"passed": True}))
    assert validated(summary)


def test_a_resumed_suite_reads_the_reports_it_has_and_runs_the_rest(tmp_path: Path) -> None:
    class Example:
        modules = {"langchain": "app"}

    (tmp_path / "advanced-rag-langchain-batch.json").write_text(json.dumps(report("batch", 20.0, 8.0, 5.0)))
    ran = []

    def runner(example: str, framework: str, mode: str, queries: int, profile: str, path: Path,
               rate: float | None) -> dict:
        ran.append((mode, queries, rate))
        return report(mode, 2.0, 2.0, 1.5)

    rows = suite({"advanced-rag": Example()}, ["advanced-rag"], "h100-8b", tmp_path, reuse=True, runner=runner)
    assert ran == [("single", 8, None), ("poisson", 32, 4.0)]  # Poisson at the kept batch report's stock rate
    assert [r["mode"] for r in rows] == ["batch", "single", "poisson"] and rows[0]["speedup"] == 1.6
    ran.clear()
    suite({"advanced-rag": Example()}, ["advanced-rag"], "h100-8b", tmp_path, runner=runner)
    assert [mode for mode, _, _ in ran] == ["batch", "single", "poisson"]  # without --reuse every mode runs


def test_the_table_replaces_only_what_lies_between_the_docs_markers(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks-twin.md"
    doc.write_text(f"# prose before\n{TABLE_START}\nold table\n{TABLE_END}\nprose after\n")
    publish(doc, "new table\n")
    assert doc.read_text() == f"# prose before\n{TABLE_START}\nnew table\n{TABLE_END}\nprose after\n"
    fresh = tmp_path / "new.md"
    publish(fresh, "a table\n")
    assert fresh.read_text() == f"{TITLE}{TABLE_START}\na table\n{TABLE_END}\n"
    publish(fresh, "the next table\n")  # the markers written make the next run keep the prose
    assert fresh.read_text() == f"{TITLE}{TABLE_START}\nthe next table\n{TABLE_END}\n"


def test_every_query_of_a_run_may_be_in_flight(tmp_path: Path, monkeypatch) -> None:
    """A batch of 32 is 32 concurrent runs (the bench's default of 16 sent it in two waves)."""
    import subprocess

    from accel.benchmarks import twin_suite

    commands = []

    def fake_run(command: list[str], **kwargs) -> None:
        commands.append(command)
        (tmp_path / "r.json").write_text(json.dumps(report("batch", 2.0, 2.0, 1.0)))

    monkeypatch.setattr(subprocess, "run", fake_run)
    twin_suite.run("advanced-rag", "langchain", "batch", 32, "h100-8b", tmp_path / "r.json", None)
    [command] = commands
    assert command[command.index("--queries") + 1] == command[command.index("--concurrency") + 1] == "32"
