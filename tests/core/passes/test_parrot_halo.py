"""Parrot / Halo passes on a planner -> experts -> aggregator graph whose prompts all open with
one charter: prefix sharing (structure, block-safe warm-ups, equivalence) and objective
deduction (latency-critical final decode, throughput task group), and the topology policy
admitting latency-critical work first (scheduler unit test on fake tasks)."""

from __future__ import annotations

from accel.ir import Graph, GraphBuilder, Kind, Slot, warmed_ids
from accel.passes import deduce_objectives, prefill_split, share_prefixes
from accel.runtime.objectives import LATENCY, THROUGHPUT
from accel.runtime.policies import topology_batch
from accel.runtime.task import EngineTask

CHARTER = "You are one member of a careful team that follows the same written rules every day. " * 2


def agents_graph(chat: bool = False) -> Graph:
    b = GraphBuilder()
    question = b.input("question")

    def prompt(parts: list) -> list:
        return [("user", parts)] if chat else parts

    plan = b.llm("plan", prompt([CHARTER, "Role: planner.\nQ: ", Slot("question"), "\nPlan:"]), {"question": question})
    experts = {
        f"e{k}": b.llm(f"e{k}", prompt([CHARTER, f"Role: expert {k}.\nQ: ", Slot("question"), "\nPlan: ", Slot("plan"), "\nNotes:"]),
                       {"question": question, "plan": plan})
        for k in (1, 2)
    }
    final = b.llm("final", prompt([CHARTER, "Role: writer.\nQ: ", Slot("question"), "\n", Slot("e1"), "\n", Slot("e2"), "\nAnswer:"]),
                  {"question": question, **experts})
    b.output(final)
    return b.build()


def _passes(graph: Graph, ctx) -> Graph:
    return deduce_objectives(share_prefixes(prefill_split(graph, ctx), ctx), ctx)


async def test_shared_openings_are_warmed_once_before_the_requests_that_share_them(run, fake_ctx):
    before = agents_graph()
    after = _passes(before, fake_ctx)
    heads = sorted(n.name for n in after.nodes() if n.name.endswith("#head"))
    assert heads == ["e1.prefill#head", "e2.prefill#head", "final.prefill#head", "plan.prefill#head"]
    common = after.node("llm#common-prefix")
    assert common.kind is Kind.PARTIAL_PREFILL and common.inputs == {}  # starts with the query
    assert all(after.is_pinned("llm#common-prefix", h) for h in heads)
    for name in ("e1", "e2", "final"):  # each request's own warm-up waits for its head
        assert after.is_pinned(f"{name}.prefill#head", f"{name}.prefill#warm")
    assert after.is_pinned("plan.prefill#head", "plan.prefill")  # all ready at once: no own warm-up
    out_before, eng_before = await run(before, {"question": "which?"})
    out_after, eng_after = await run(after, {"question": "which?"})
    assert out_after == out_before
    real = [r for r in eng_after.requests["llm"] if r.prompt_token_ids is None]
    assert real == eng_before.requests["llm"]  # the engine sees the same prompts
    warmups = [warmed_ids(r) for r in eng_after.requests["llm"] if r.prompt_token_ids is not None]
    prompts = [await fake_ctx.llm("llm").tokenize(r.prompt) for r in real]
    assert len(warmups) >= 5  # the common opening, 4 heads (+ per-query warm-ups)
    for ids in warmups:  # block-aligned prefixes of prompts the engine then sees
        assert len(ids) % 4 == 0 and any(full[: len(ids)] == ids for full in prompts)


def test_objectives_mark_the_final_decode_and_the_expert_task_group(fake_ctx):
    after = _passes(agents_graph(), fake_ctx)
    assert after.node("final.decode").schedule.objective == LATENCY
    assert after.node("e1.decode").schedule.objective == THROUGHPUT == after.node("e2.decode").schedule.objective
    assert after.node("plan.decode").schedule.objective is None  # feeds the group, not the final decode
    assert after.node("final.prefill#warm").schedule.objective == LATENCY
    assert any("throughput task group: e1.decode, e2.decode" in note for note in after.meta["notes"])


def test_a_chain_marks_the_immediate_predecessor_latency_critical(fake_ctx):
    b = GraphBuilder()
    q = b.input("q")
    first = b.llm("first", ["Rewrite: ", Slot("q")], {"q": q})
    b.output(b.llm("second", ["Answer: ", Slot("first")], {"first": first}))
    after = deduce_objectives(b.build(), fake_ctx)
    assert after.node("second.decode").schedule.objective == LATENCY == after.node("first.decode").schedule.objective


async def test_chat_prompts_share_the_opening_cut_at_the_chat_template(fake_ctx):
    after = share_prefixes(prefill_split(agents_graph(chat=True), fake_ctx), fake_ctx)
    common = await after.node("llm#common-prefix-user").op.prefix_text({})
    head = await after.node("e1.prefill#head").op.prefix_text({})
    full = await fake_ctx.llm("llm").render_chat(after.node("e1.prefill").op.compute({"question": "q?", "plan": "p"}))
    assert full.startswith(head) and head.startswith(common) and CHARTER in common and "\x00" not in common


def test_without_a_tokenizer_nothing_is_warmed():
    from accel.passes import PassContext

    after = share_prefixes(agents_graph(), PassContext())
    assert not [n for n in after.nodes() if n.kind is Kind.PARTIAL_PREFILL]


def test_topology_policy_admits_latency_critical_work_first():
    old = EngineTask("q0", "map", 3, ["m1", "m2", "m3"], arrival=0.0, objective=THROUGHPUT)
    urgent = EngineTask("q1", "final", 0, ["f"], arrival=5.0, objective=LATENCY)
    plain = EngineTask("q2", "other", 1, ["o"], arrival=1.0)
    batch = topology_batch([old, urgent, plain], 2)
    assert [(s.task.node, s.size) for s in batch] == [("final", 1), ("map", 1)]
    assert topology_batch([old, plain], 10)[0].task is old  # unmarked: Teola's order as before


def test_a_planner_passed_along_beside_the_experts_is_not_in_their_group(fake_ctx):
    b = GraphBuilder()
    q = b.input("q")
    plan = b.llm("plan", ["Plan: ", Slot("q")], {"q": q})
    e1 = b.llm("e1", ["One: ", Slot("plan")], {"plan": plan})
    e2 = b.llm("e2", ["Two: ", Slot("plan")], {"plan": plan})
    b.output(b.llm("final", ["All: ", Slot("plan"), Slot("e1"), Slot("e2")], {"plan": plan, "e1": e1, "e2": e2}))
    after = deduce_objectives(b.build(), fake_ctx)
    assert after.node("e1.decode").schedule.objective == THROUGHPUT
    assert after.node("plan.decode").schedule.objective is None
