"""Learned prefill on a LangGraph docs app (the Self-RAG tutorial), stock vs `accel.wrap` on
the real engines: after the first run, the prompts of the generation and the hallucination
grader (documents the run retrieved, quoted as they print) are warmed in vLLM's prefix cache
while the graph is still grading documents; the requests the graph sends and its
answers stay stock's, and the real requests find the warmed tokens cached."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("langgraph")

import accel  # noqa: E402

from .apps import lg_self_rag  # noqa: E402
from .fidelity import assert_same_requests, record  # noqa: E402
from .test_langgraph_docs import plain  # noqa: E402

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def warmed_sites(explained: str) -> dict[str, dict[str, int]]:
    """site -> its warm-up counters, read from explain()."""
    found = {}
    for site, line in re.findall(r"  (llm:\S+): .*\n    (.*)", explained):
        counts = {"sent": r"(\d+) warm-up", "cached": r"(\d+) found cached", "late": r"(\d+) late",
                  "busy": r"(\d+) skipped"}
        found[site] = {k: int(m.group(1)) if (m := re.search(p, line)) else 0 for k, p in counts.items()}
    return found


def test_self_rag_prompts_are_warmed_before_the_graph_sends_them(store, chat, llm_proxy, questions) -> None:
    graph = lg_self_rag.build(store, chat)
    fast = accel.wrap(graph)
    inputs = [{"question": q} for q in questions]
    stock = record(lambda: [graph.invoke(x) for x in inputs], llm_proxy)
    ours = record(lambda: [fast.invoke(x) for x in inputs], llm_proxy)
    assert plain(ours.outputs) == plain(stock.outputs)
    assert_same_requests(stock, ours)  # warm-ups are counted apart, never in place of a request
    assert stock.warmups == 0 and ours.warmups > 0

    explained = fast.explain()
    sites = warmed_sites(explained)
    # Which grading calls get a warm-up in time is the machine's call: the first follows the
    # retrieval at once on a quiet machine (never warmed: the rule is pinned down in
    # tests/adapters/test_learned_floor.py), but under load the step between the two graph
    # nodes alone can pass `MIN_LAG_S`, and then warming it is right. Only the calls behind all
    # the grading calls are counted on: the generation and the hallucination grader.
    for site in ("llm:generate/0#0", "llm:generate/0#1"):
        state = re.search(rf"  {re.escape(site)}: .*\n    (.*)", explained)
        assert state and re.match(r"warmed through part (\d+) of \1;", state.group(1)), (site, explained)  # its whole pattern held
        counts = sites[site]
        # every later run sent its warm-up, found the engine with no spare capacity, or was
        # overtaken by its own call (late: a warm-up still on its way, sent or not)
        assert counts["sent"] + counts["busy"] + counts["late"] >= len(questions) - 1, (site, explained)
        assert counts["cached"] <= counts["sent"], (site, explained)
    # the warmed tokens were found in vLLM's prefix cache (cached_tokens) by a real request
    assert sites["llm:generate/0#0"]["cached"] + sites["llm:generate/0#1"]["cached"] > 0, explained
    assert "vectordb:retrieve/0#0[0].repr" in explained  # the documents as the prompt prints them


def test_switched_off_by_name_it_sends_no_warm_up(store, chat, llm_proxy, questions) -> None:
    graph = lg_self_rag.build(store, chat)
    fast = accel.wrap(graph, disabled_passes=["learned_prefill"])
    ours = record(lambda: [fast.invoke({"question": q}) for q in questions], llm_proxy)
    assert ours.warmups == 0
    assert "learned prefill: off" in fast.explain()


def test_a_prompt_that_changes_every_run_is_not_warmed_once_seen_to_change(store, chat, llm_proxy, questions) -> None:
    """A node whose prompt quotes the retrieved passages after text that differs in every run
    (here a run counter) is learned again each run, and once a run has shown its start changes,
    nothing of it is warmed: every warm-up the proxy saw (named by the run that sent it) is the
    second run's.

    The second run itself may warm or not: a site's first pattern is trusted whole (so that the
    runs right after the first gain), and this call comes behind an LLM call, which the floor
    warms when it usually comes at least `MIN_LAG_S` (50 ms) after its last value. That lag is
    the grade call's time: 115-240 ms in a first run, 40-100 ms in later ones, measured here
    at loads of 1 to 15, so whether the second run warms the first run's (stale) pattern is
    the machine's call. Warm-ups are told apart by their request ids, not by when the proxy
    saw them: one the second run sent as it ended may reach the proxy during the third (and
    the engine's start probe, a token-id prompt too, is no warm-up)."""
    from langgraph.graph import START, StateGraph

    from accel.scope import current_run

    from .apps.lg_rag_part1 import State

    counter = iter(range(1000))
    programs: list[int] = []

    def retrieve(state: State):
        return {"context": store.similarity_search(state["question"], k=2)}

    def grade(state: State):
        # static text only: a grade quoting the question could rightly be warmed when the
        # retrieval before it takes long (a loaded machine), which is not what this tests
        chat.invoke("Is the context relevant to the question? Answer yes or no.")
        return {}

    def generate(state: State):
        programs.append(current_run().program)
        docs = "\n\n".join(d.page_content for d in state["context"])
        prompt = f"Run {next(counter)} of the assistant.\n{docs}\nQuestion: {state['question']}"
        return {"answer": chat.invoke(prompt).content}

    builder = StateGraph(State).add_sequence([retrieve, grade, generate])
    builder.add_edge(START, "retrieve")
    fast = accel.wrap(builder.compile())
    llm_proxy.recorder.take()
    for q in questions:
        fast.invoke({"question": q})
    sent = [str(r.body.get("request_id", "")) for r in llm_proxy.recorder.take() if isinstance(r.body, dict)]
    warmed_by = {int(m.group(1)) for rid in sent if (m := re.match(r"program(\d+)/warm:", rid))}
    explained = fast.explain()
    assert len(programs) == len(questions) and warmed_by <= {programs[1]}, (warmed_by, programs, explained)
    generate_site = re.search(r"  llm:generate/0#0: .*\n    (.*)", explained)
    assert generate_site and "not warmed: no run value in its verified prefix" in generate_site.group(1), explained
    assert f"learned again {len(questions) - 1}x" in generate_site.group(1), explained


def test_learning_is_switched_off_by_the_wrap_options(store, chat, llm_proxy, questions) -> None:
    graph = lg_self_rag.build(store, chat)
    fast = accel.wrap(graph, disabled_passes=["learned_prefill"])
    ours = record(lambda: [fast.invoke({"question": q}) for q in questions], llm_proxy)
    assert ours.warmups == 0
    assert "learned prefill: off (disabled_passes)" in fast.explain()
