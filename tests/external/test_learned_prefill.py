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
    # the first grading call follows the retrieval at once: never warmed; the later ones wait
    # behind it, and the generation and the hallucination grader behind all of them
    # (whether the later grading calls' warm-ups come in time depends on how fast the first
    # grade decodes, so only the calls behind all of them are counted on)
    assert sites["llm:grade_documents/0#0"]["sent"] == 0, explained
    for site in ("llm:generate/0#0", "llm:generate/0#1"):
        # each later run sent it, or left it out when the engine had no spare capacity then
        assert sites[site]["sent"] + sites[site]["busy"] >= len(questions) - 1, (site, explained)
        # a warm-up that arrived before its call was found in the prefix cache (cached_tokens)
        assert sites[site]["cached"] + sites[site]["late"] == sites[site]["sent"] and sites[site]["cached"], explained
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
