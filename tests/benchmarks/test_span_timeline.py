"""`accel bench --spans`: accel's primitive spans recorded for a measured window (fake engines,
a runtime built before the recording starts), summarised per node, drawn, and moved out of the
report into their own file."""

import asyncio
import json
import time

import pytest

from accel.benchmarks import span_timeline
from accel.benchmarks.harness import BenchConfig
from accel.engines.errors import InvalidRequest
from accel.ir import GraphBuilder, ItemsOp, Kind, Template
from accel.runtime import Runtime
from accel.testing.fakes import FakeEngine
from accel.tracer import spans as accel_spans


def _template() -> Template:
    b = GraphBuilder()
    docs = b.input("docs")
    vecs = b.add(Kind.EMBED, "embed", engine="embed", inputs={"docs": docs}, op=ItemsOp("docs"))
    b.output(b.add(Kind.RERANK, "rerank", engine="rerank", inputs={"v": vecs}, op=ItemsOp("v")))
    return Template.from_graph(b.graph)


async def _queries(runtime: Runtime, n: int, *, first: int = 0) -> None:
    template = _template()
    await asyncio.gather(*(runtime.run(template, {"docs": ["a", "b"]}, query_id=f"q{first + i}") for i in range(n)))


async def test_the_window_holds_each_query_and_node_from_start_on_and_the_provider_comes_back():
    engines = {"embed": FakeEngine("embed", latency=0.02), "rerank": FakeEngine("rerank", latency=0.01)}
    before = accel_spans.current_tracer_provider()
    async with Runtime(engines) as runtime:  # made before the recording: it reads the provider per query
        with span_timeline.recording() as recorder:
            await _queries(runtime, 2)  # the warm-up: before start(), left out
            recorder.start(time.time_ns())
            await _queries(runtime, 3, first=10)
            rows = recorder.rows()
        await _queries(runtime, 1, first=20)  # after the recording: not in it
        assert recorder.rows() == rows
    assert accel_spans.current_tracer_provider() is before

    assert {r["query"] for r in rows} == {"q10", "q11", "q12"}
    nodes = {s["node"]: s for s in span_timeline.by_node(rows)}
    assert set(nodes) == {span_timeline.QUERY_SPAN, "embed", "rerank", "output"}
    assert all(s["spans"] == 3 for s in nodes.values())
    embed, rerank = nodes["embed"], nodes["rerank"]
    assert embed["median_s"] >= 0.02 and rerank["median_s"] >= 0.01  # each span lasts at least its fake engine's call
    assert embed["first_start_s"] >= 0 and embed["last_end_s"] <= rerank["last_end_s"]
    order = [s["node"] for s in span_timeline.by_node(rows)]
    assert order.index("embed") < order.index("rerank")
    assert embed["median_batch"] == 6  # the three queries' two texts merged into one call


def test_the_table_leaves_out_nodes_that_never_held_time():
    rows = [
        {"node": "slow", "start_s": 0.0, "end_s": 0.5, "batch_size": 4},
        {"node": "instant", "start_s": 0.5, "end_s": 0.5, "batch_size": None},
    ]
    text = span_timeline.table(span_timeline.by_node(rows))
    assert "slow" in text and "instant" not in text
    assert text.splitlines()[1].split()[-1] == "4"


def _report(mode: str, rows: list[dict]) -> dict:
    timeline = {"nodes": span_timeline.by_node(rows), "spans": rows}
    system = {"timeline": timeline}
    report = {"example": "advanced-rag", "framework": "llamaindex", "mode": mode, "config": {"queries": 2},
              "systems": {"accel-topology": system, "stock-sequential": {}}, "simulated": {"twin": "h100-8b"}}
    if mode == "poisson":
        report["rates"] = [{"rate": 2.5, "systems": {"accel-topology": system}}]
    return report


@pytest.mark.parametrize("mode,label,picture", [
    ("batch", "accel-topology", "spans-accel-topology.png"),
    ("poisson", "accel-topology @ 2.5/s", "spans-accel-topology-at-2.5qps.png"),
])
def test_write_moves_the_spans_to_their_own_file_and_draws_each_run(tmp_path, mode, label, picture):
    rows = [{"node": "embed", "start_s": 0.0, "end_s": 0.1, "batch_size": 2, "query": "q0"},
            {"node": "embed", "start_s": 0.05, "end_s": 0.2, "batch_size": 2, "query": "q1"}]
    report = _report(mode, rows)
    written = span_timeline.write(report, tmp_path / "spans.json")

    assert [(w[0], w[2].name) for w in written] == [(label, picture)]
    assert (tmp_path / picture).read_bytes().startswith(b"\x89PNG")
    document = json.loads((tmp_path / "spans.json").read_text())
    assert document[label]["spans"] == rows
    assert "spans" not in report["systems"]["accel-topology"]["timeline"]  # the report keeps the summary only
    assert report["systems"]["accel-topology"]["timeline"]["nodes"][0]["spans"] == 2


def test_spans_are_refused_in_single_mode_with_the_remedy():
    with pytest.raises(InvalidRequest, match="--mode batch or --mode poisson"):
        BenchConfig("advanced-rag", "langchain", "single", spans=True).check()
