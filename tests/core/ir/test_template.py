"""Templates: frozen arrays, fast instantiation, the cache key, GraphTransform by config."""

from __future__ import annotations

import time

import pytest

from accel.ir import (
    CallOp,
    GraphBuilder,
    Kind,
    MissingInput,
    Ref,
    Slot,
    Template,
    TemplateCache,
    config_key,
)
from accel.testing.templates import ModuleTemplate, refine


def chain(n: int) -> GraphBuilder:
    b = GraphBuilder()
    prev = b.input("x")
    for i in range(n - 2):
        prev = b.add(Kind.CALL, f"c{i}", inputs={"x": prev}, op=CallOp(lambda x: x, blocking=False))
    b.output(prev)
    return b


def test_template_arrays_match_the_graph():
    g = chain(5).build()
    t = Template.from_graph(g)
    assert t.order == ("x", "c0", "c1", "c2", "output")
    assert t.pred_count == (0, 1, 1, 1, 1)
    assert t.succs[0] == (1,) and t.succs[-1] == ()
    assert t.port_refs[1] == (("x", 0, None),)
    assert t.depth == (4, 3, 2, 1, 0)
    assert t.inputs == ("x",) and t.output == "output"


def test_instantiate_binds_inputs_and_is_fast():
    t = Template.from_graph(chain(50).build())
    inst = t.instantiate({"x": 1}, "q1")
    assert inst.values == {"x": 1} and inst.query_id == "q1" and inst.template is t
    n = 2000
    start = time.perf_counter()
    for i in range(n):
        t.instantiate({"x": i}, f"q{i}")
    per_call = (time.perf_counter() - start) / n
    assert per_call < 1e-3  # the task's explicit budget: < 1 ms for a 50-node template


def test_instantiate_rejects_missing_and_unknown_inputs():
    t = Template.from_graph(chain(3).build())
    with pytest.raises(MissingInput) as err:
        t.instantiate({}, "q")
    assert err.value.node == "x"
    with pytest.raises(MissingInput):
        t.instantiate({"x": 1, "c0": 2}, "q")


def qa(b, inputs, config):
    prompt = ("Context: ", Slot("context"), " Q: ", Slot("question"))
    return refine(b, question=inputs["q"], chunks=inputs["chunks"], n=config.get("n", 1), qa_prompt=prompt, refine_prompt=prompt + (Slot("answer"),))


def test_refine_config_becomes_chained_llm_pairs():
    t = ModuleTemplate("qa", ["q", "chunks"])
    t.component("synth", qa, reads=["q", "chunks"])
    g = t.transform({"synth": {"n": 3}})
    decodes = [n for n in g.nodes() if n.kind is Kind.DECODE]
    prefills = [n for n in g.nodes() if n.kind is Kind.PREFILL]
    assert len(decodes) == 3 and len(prefills) == 3
    assert sorted(n.depth for n in decodes) == [1, 3, 5]  # a chain: every pair one level apart
    assert g.node("synth.refine2.prefill").inputs["answer"] == Ref("synth.refine1.decode")
    assert g.node("synth.refine1.prefill").inputs["context"] == Ref("chunks", 1)


def test_template_edges_become_order_edges_between_components():
    t = ModuleTemplate("two", ["q"])
    t.component("a", lambda b, i, c: b.add(Kind.CALL, "f", inputs={"x": i["q"]}, op=CallOp(str)), reads=["q"])
    t.component("b", lambda b, i, c: b.add(Kind.CALL, "g", inputs={"x": i["q"]}, op=CallOp(str)), reads=["q"])
    g = t.transform()
    assert ("a.f", "b.g", False) in list(g.edges())


def test_cache_builds_once_per_structure_and_config():
    t = ModuleTemplate("qa", ["q", "chunks"])
    t.component("synth", qa, reads=["q", "chunks"])
    cache = TemplateCache()
    builds = []

    def get(n):
        config = {"synth": {"n": n}}
        return cache.get(t.structure_key, config_key(config), lambda: builds.append(n) or t.transform(config))

    a, b, c = get(2), get(2), get(3)
    assert a is b and a is not c
    assert builds == [2, 3] and (cache.hits, cache.misses) == (1, 2)
    assert len(c) > len(a)
    assert config_key({"a": 1, "b": 2}) == config_key({"b": 2, "a": 1}) != config_key({"a": 2, "b": 1})
