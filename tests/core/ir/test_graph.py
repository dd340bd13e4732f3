"""Graph, builder and validation: depth semantics, typed errors, copies."""

from __future__ import annotations

import pytest

from accel.ir import (
    CallOp,
    CycleError,
    GatherOp,
    Graph,
    GraphBuilder,
    GraphError,
    ItemsOp,
    Kind,
    Node,
    Ref,
    Slot,
)
from accel.testing.templates import tree_summarize


def diamond() -> Graph:
    b = GraphBuilder()
    q = b.input("q")
    left = b.add(Kind.EMBED, "left", engine="embed", inputs={"texts": q}, op=ItemsOp("texts"))
    right = b.add(Kind.CALL, "right", inputs={"x": q}, op=CallOp(lambda x: x))
    deep = b.add(Kind.CALL, "deep", inputs={"x": right}, op=CallOp(lambda x: x))
    join = b.add(Kind.AGGREGATE, "join", inputs={"a": left, "b": deep}, op=GatherOp("list"))
    b.output(join)
    return b.build()


def test_depth_is_longest_path_to_output():
    g = diamond()
    depths = {n.name: n.depth for n in g.nodes()}
    assert depths == {"output": 0, "join": 1, "deep": 2, "left": 2, "right": 3, "q": 4}


def test_siblings_share_a_depth_in_tree_summarize():
    b = GraphBuilder()
    q, chunks = b.input("q"), b.input("chunks")

    def prompt(k: int):
        return ["Q: ", Slot("question"), *[p for i in range(k) for p in ("\n", Slot(f"ctx{i}"))]]

    out = tree_summarize(b, question=q, chunks=chunks, n=5, fanout=2, prompt=prompt)
    b.output(out)
    g = b.build()
    decodes = [n for n in g.nodes() if n.kind is Kind.DECODE]
    by_level: dict[str, set[int]] = {}
    for n in decodes:
        by_level.setdefault(n.name.split(".")[0], set()).add(n.depth)
    # 5 chunks in groups of 2 -> 3 calls -> 2 calls -> 1 call; each level shares one depth
    counts = [sum(1 for n in decodes if n.name.startswith(f"l{i}.")) for i in range(3)]
    assert counts == [3, 2, 1]
    assert all(len(d) == 1 for d in by_level.values())
    assert min(by_level["l0"]) > min(by_level["l1"]) > min(by_level["l2"])


def test_duplicate_names_and_unknown_refs_are_typed_errors():
    b = GraphBuilder()
    q = b.input("q")
    with pytest.raises(GraphError) as err:
        b.input("q")
    assert err.value.node == "q" and "already exists" in err.value.cause
    with pytest.raises(GraphError) as err:
        b.add(Kind.CALL, "c", inputs={"x": Ref("missing")}, op=CallOp(lambda x: x))
    assert "missing" in str(err.value) and "Remedy" in str(err.value)
    with pytest.raises(GraphError):
        b.add(Kind.EMBED, "e", inputs={"texts": q}, op=ItemsOp("texts"))
        b.output(Ref("e"))
        b.build()


def test_validate_requires_exactly_one_output():
    g = Graph()
    g.add(Node("q", Kind.INPUT))
    with pytest.raises(GraphError, match="exactly one Output"):
        g.validate()


def test_cycles_are_reported_with_a_node():
    g = Graph()
    g.add(Node("a", Kind.CALL, inputs={"x": Ref("b")}, op=CallOp(lambda x: x)))
    g.add(Node("b", Kind.CALL, inputs={"x": Ref("a")}, op=CallOp(lambda x: x)))
    g.add(Node("output", Kind.OUTPUT, inputs={"value": Ref("b")}))
    with pytest.raises(CycleError) as err:
        g.validate()
    assert err.value.node in {"a", "b"}


def test_order_edges_are_separate_from_data_edges():
    b = GraphBuilder()
    q = b.input("q")
    a = b.add(Kind.CALL, "a", inputs={"x": q}, op=CallOp(lambda x: x))
    c = b.add(Kind.CALL, "c", inputs={"x": q}, op=CallOp(lambda x: x))
    b.order(a, c)
    b.output(c)
    g = b.build()
    assert not g.is_data_edge("a", "c") and g.is_data_edge("q", "c")
    assert g.preds("c") == ["q", "a"]
    with pytest.raises(GraphError):
        g.remove_edge("q", "c")
    g.remove_edge("a", "c")
    assert g.preds("c") == ["q"]


def test_copy_is_independent():
    g = diamond()
    g.meta["notes"].append("x")
    h = g.copy()
    h.node("left").attrs["batchable"] = False
    h.meta["notes"].append("y")
    assert "batchable" not in g.node("left").attrs
    assert g.meta["notes"] == ["x"]
    assert [n.name for n in h.nodes()] == [n.name for n in g.nodes()]
    assert list(h.edges()) == list(g.edges())


def test_topo_order_is_deterministic_and_respects_edges():
    g = diamond()
    order = g.topo_order()
    assert order == diamond().topo_order()
    for src, dst, _ in g.edges():
        assert order.index(src) < order.index(dst)


def test_engine_nodes_need_an_engine():
    b = GraphBuilder()
    q = b.input("q")
    e = b.add(Kind.EMBED, "e", inputs={"texts": q}, op=ItemsOp("texts"))
    b.output(e)
    with pytest.raises(GraphError, match="no engine"):
        b.build()
