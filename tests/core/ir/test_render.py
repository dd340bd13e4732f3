"""Graph pictures: mermaid text covers every node and edge; image files are produced."""

from __future__ import annotations

import re
import shutil

import pytest

from accel.ir import CallOp, GraphBuilder, ItemsOp, Kind, Slot
from accel.passes import LLMInfo, PassContext, optimize
from accel.tracer.render import mermaid_id, render, render_before_after, to_dot, to_mermaid


async def _tokenize(text: str, *, add_special_tokens: bool = True) -> list[int]:
    return [len(w) for w in text.split()]


def sample():
    b = GraphBuilder()
    q, docs = b.input("question"), b.input("docs")
    idx = b.add(Kind.EMBED, "index.embed", engine="embed", inputs={"texts": docs}, op=ItemsOp("texts"))
    ingest = b.add(Kind.INGEST, "index.ingest", engine="vectordb", inputs={"rows": idx}, op=ItemsOp("rows"))
    queries = b.llm("expand", ["Rewrite: ", Slot("q")], {"q": q}, split="lines")
    b.order(ingest, "expand.prefill")
    vecs = b.add(Kind.EMBED, "q.embed", engine="embed", inputs={"texts": queries}, op=ItemsOp("texts"))
    hits = b.add(Kind.SEARCH, "search", engine="vectordb", inputs={"vectors": vecs}, op=ItemsOp("vectors"))
    ctx = b.add(Kind.CALL, "join", inputs={"hits": hits}, op=CallOp(str))
    b.output(b.llm("answer", ["Instructions " * 20, Slot("q"), " ctx: ", Slot("c")], {"q": q, "c": ctx}))
    p = b.build()
    e = optimize(p, context=PassContext(profiles={"embed": 8}, llm=lambda engine: LLMInfo(_tokenize)))
    return p, e


def test_mermaid_has_every_node_and_edge():
    p, e = sample()
    for graph in (p, e):
        text = to_mermaid(graph, title="t")
        for node in graph.nodes():
            label = node.name.replace("#", "#35;")
            assert re.search(rf'^\s+{re.escape(mermaid_id(node.name))}\["{re.escape(label)}<br/>', text, re.M)
        for src, dst, data in graph.edges():
            arrow = "-->" if data else "-.->"
            assert f"{mermaid_id(src)} {arrow} {mermaid_id(dst)}" in text
        assert text.count("-->") + text.count("-.->") == len(list(graph.edges()))
    assert "passes: prune_dependencies" in to_mermaid(e)


def test_mermaid_ids_are_distinct_and_safe():
    names = ["a.b", "a_b", "a#b", "a b", "a_2e_b"]
    ids = [mermaid_id(n) for n in names]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"\w+", i) for i in ids)


@pytest.mark.parametrize("suffix", [".png", ".svg", ".mmd", ".md", ".dot"])
def test_render_writes_each_format(tmp_path, suffix):
    _, e = sample()
    path = render(e, tmp_path / f"graph{suffix}", title="e-graph", use_dot=False if suffix in {".png", ".svg"} else None)
    data = path.read_bytes()
    assert len(data) > 200
    if suffix == ".png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    if suffix == ".svg":
        assert b"<svg" in data[:2000]
    if suffix == ".dot":
        assert data.count(b'" -> "') == len(list(e.edges())) and b"style=dashed" in data


def test_before_after_picture_and_mermaid(tmp_path):
    p, e = sample()
    png = render_before_after(p, e, tmp_path / "ba.png", use_dot=False)
    assert png.read_bytes()[:4] == b"\x89PNG"
    text = render_before_after(p, e, tmp_path / "ba.mmd").read_text()
    for node in [*p.nodes(), *e.nodes()]:
        assert node.name.replace("#", "#35;") in text
    assert text.count("subgraph") == 2


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz not installed")
def test_graphviz_path(tmp_path):
    p, e = sample()
    assert render_before_after(p, e, tmp_path / "ba.svg").read_bytes().count(b"<g id=\"node") == len(p) + len(e)


def test_dot_text_marks_streaming_and_pinned_edges():
    _, e = sample()
    text = to_dot(e)
    assert "penwidth=3" in text and "style=dotted" in text


def test_unknown_suffix_is_a_typed_error(tmp_path):
    from accel.ir import GraphError

    with pytest.raises(GraphError, match="cannot render"):
        render(sample()[0], tmp_path / "g.jpg")
