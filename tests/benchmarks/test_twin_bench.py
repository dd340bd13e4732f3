"""`accel bench ... --twin`: the harness on engine twins (the `h100-8b` profile, in their own
process; Postgres real). The apps call the twins' encoder servers, stock and accel answer the
same, and the report says on its first line that every number is simulated, with the twins' lag."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.benchmarks import llm_steps
from accel.benchmarks.harness import BenchConfig, compare
from accel.benchmarks.summary import render
from accel.config import Settings
from accel.engines import stack as local
from accel.engines.offline.llm import build_llm
from accel.engines.twin.stack import up_twin
from accel.examples.stack import StackConfig

pytestmark = [pytest.mark.engines, pytest.mark.slow]


@pytest.fixture(scope="module")
def twin_stack(tmp_path_factory: pytest.TempPathFactory, postgres_factory) -> Iterator[StackConfig]:
    import asyncio

    cfg = Settings(home=tmp_path_factory.mktemp("twin-home"), pg_dsn=postgres_factory("accel-twin-bench-"),
                   llm_model=str(build_llm("tiny")))
    info = asyncio.run(up_twin("h100-8b", cfg))
    try:
        yield StackConfig.from_stack(info, max_tokens=12, context_window=2048)
    finally:
        local.down(cfg)


@pytest.mark.parametrize("framework", ["langchain", "llamaindex"])
def test_a_twin_run_is_labelled_simulated_and_answers_as_stock(twin_stack: StackConfig, framework: str,
                                                               tmp_path: Path) -> None:
    # a small corpus, as tests/benchmarks/test_harness.py's (issue 26: what is checked here is the
    # label, the twins' lag and stock-equal answers, not the size; the bench's 12 default
    # modules took most of the run to index)
    config = BenchConfig("advanced-rag", framework, "batch", queries=4, systems=("stock-sequential", "accel-topology"),
                         modules=("heapq", "bisect", "fnmatch"), max_chars=1500, twin="h100-8b", spans=True,
                         steps=True)
    report = compare(config, twin_stack)
    assert report["simulated"]["profile"] == "h100-8b"
    assert report["simulated"]["label"] == "simulated from measured H100 curves"
    assert report["simulated"]["twin_lag_s"] is not None and report["simulated"]["twin_lag_s"] >= 0
    own = [report["systems"][name]["twin_lag_s"] for name in ("stock-sequential", "accel-topology")]
    assert all(lag is not None and 0 <= lag <= report["simulated"]["twin_lag_s"] + 1e-9 for lag in own), own
    for name in ("stock-sequential", "accel-topology"):  # which twin fell behind, and the parts add up
        system = report["systems"][name]
        assert set(system["twin_lag_by_twin_s"]) == {"llm", "embed", "rerank"}, system["twin_lag_by_twin_s"]
        assert sum(system["twin_lag_by_twin_s"].values()) == pytest.approx(system["twin_lag_s"])
    spent = [report["systems"][name]["twin_cpu_s"] for name in ("stock-sequential", "accel-topology")]
    assert all(cpu is not None and cpu > 0 for cpu in spent), spent  # the twins tokenised and answered every request
    assert "the twins' own CPU ms/query" in render(report)
    for name in ("stock-sequential", "accel-topology"):  # the modelled engines' busy time in each run
        busy, span = report["systems"][name]["twin_busy_s"], report["systems"][name]["makespan_s"]
        assert set(busy) == {"llm", "embed", "rerank", "llm_steps"}, busy
        assert 0 < busy["llm"] <= span and busy["llm_steps"] >= 4 * 4  # at least a step per call
        assert 0 < busy["embed"] < span and 0 < busy["rerank"] < span
    assert "the twins' modelled busy s (share of the run): LLM " in render(report)
    for name in ("stock-sequential", "accel-topology"):  # the LLM twin's own steps in the same window
        steps, busy = report["systems"][name]["llm_steps"], report["systems"][name]["twin_busy_s"]
        assert steps["steps"] == busy["llm_steps"] and steps["busy_s"] == pytest.approx(busy["llm"], abs=1e-3)
        assert 0 < steps["floor_s"] < steps["busy_s"] and 0 <= steps["stall_s"] < steps["busy_s"]
        assert 0 < steps["under_floor_steps"] <= steps["steps"] and steps["decode_tokens"] > 0
    assert "the LLM twin's steps: " in render(report)
    picture = llm_steps.write(report, tmp_path / "steps.json")
    assert picture is not None and picture.stat().st_size > 0
    kept = json.loads((tmp_path / "steps.json").read_text())
    assert set(kept) == {"stock-sequential", "accel-topology"}
    assert len(kept["accel-topology"]["steps"]) == report["systems"]["accel-topology"]["llm_steps"]["steps"]
    assert not any("llm_step_rows" in s for s in report["systems"].values())  # moved out of the report
    assert report["verdict"].startswith("SIMULATED (simulated from measured H100 curves, twin h100-8b")
    assert report["engines"]["embed_server"] == twin_stack.embed_base_url
    assert report["engines"]["rerank_server"] == twin_stack.rerank_base_url
    assert report["equal_rate"]["accel-topology"] == 1.0
    assert report["systems"]["accel-topology"]["failed_queries"] == 0
    assert report["capacity_bound"] is not None
    # the GPU twins each model their own device: the bound overlaps their work instead of adding it
    assert {e["engine"]: e["device"] for e in report["capacity_bound"]["engines"]} == {
        "embed": "embed twin", "rerank": "rerank twin", "llm": "llm twin"}
    # the batch bound is never below the LLM's step floor of the run's own calls, each counted
    # with the tokens its response reported (four queries of four calls each)
    floor = report["capacity_bound"]["step_floor"]
    assert floor["calls"] == 16 and floor["distinct_calls"] == 16 and floor["answer_tokens"] > 16
    assert 0 < floor["value_s"] <= min(s["makespan_s"] for s in report["systems"].values())
    assert min(report["capacity_bound"]["per_round_s"]) >= floor["value_s"]
    # the encoder twins' call logs, split by the lone queries' windows (one monotonic clock across
    # the two processes): every query embedded and reranked, and queued on the devices those
    # calls make the schedule no sooner than the LLM alone (10 ms: a step's composition may shift)
    assert floor["encoder_calls"] >= 2 * 4
    assert floor["as_sent_s"] > 0 and floor["as_sent_encoders_s"] >= floor["as_sent_s"] - 0.01
    # what the front end spent per query: the engines are in the twins' process, so only the
    # app and accel count; accel's loop is part of the process's time
    spent = report["systems"]["accel-topology"]["front_end"]
    assert spent["includes_in_process_encoders"] is False
    assert 0 < spent["loop_cpu_ms_per_query"] <= spent["process_cpu_ms_per_query"]
    assert report["systems"]["stock-sequential"]["front_end"]["loop_cpu_ms_per_query"] is None
    # --spans: accel's own spans in its measured window, the warm-up query left out; stock has none
    timeline = report["systems"]["accel-topology"]["timeline"]
    queries = [r for r in timeline["spans"] if r["node"] == "accel.query"]
    assert len(queries) == 4 and all(0 <= r["start_s"] <= r["end_s"] for r in queries)
    assert any(r["engine"] is not None and r["name"] in ("accel.Decode", "accel.PartialDecode") for r in timeline["spans"])
    assert sum(n["spans"] for n in timeline["nodes"]) == len(timeline["spans"])
    assert "timeline" not in report["systems"]["stock-sequential"]


def test_docs_apps_script_compares_stock_and_accel_on_the_twins(twin_stack: StackConfig, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/docs_apps_twin.py (apps from the docs, batched, stock against accel.wrap): on
    twins its JSON says simulated, every round's answers equal (a LangChain batch, a LangGraph
    batch, LlamaIndex `aquery`s gathered on the script's one loop), and each system's batch
    carries the LLM twin's busy time and steps and the embedding twin's busy time."""
    import importlib.util
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "docs_apps_twin.py"
    spec = importlib.util.spec_from_file_location("docs_apps_twin", script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "docs_apps_twin", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    out = tmp_path / "docs-apps.json"
    module.main(["--queries", "3", "--rounds", "1", "--max-tokens", "8", "--apps", "lc_rag_tutorial,lg_rag_part1,li_starter",
                 "--json", str(out)], config=twin_stack)
    report = json.loads(out.read_text())
    assert report["simulated"] is True
    assert [row["app"] for row in report["apps"]] == ["lc_rag_tutorial", "lg_rag_part1", "li_starter"]
    for row in report["apps"]:
        assert row["rounds_equal"] == row["rounds"] == 1, row
        for name in ("stock", "accel"):
            system = row[name]
            assert system["s"] > 0 and system["alone_s"] > 0
            assert 0 < system["llm_busy_s"] <= system["s"] and system["llm_steps"] >= 8  # 8 tokens decoded, a step each
            assert system["embed_busy_s"] > 0
        assert row["speedup"] == pytest.approx(row["stock"]["s"] / row["accel"]["s"])
