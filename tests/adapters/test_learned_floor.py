"""Learned prefill's bookkeeping at the floor, without engines: which sites a run warms, when,
and when a site stops being warmed. The warm-up itself (`RunRecorder._launch`) is replaced by
a list that records what would be sent."""

from __future__ import annotations

import json

import pytest

from accel.adapters.common.bindings import EngineSpec
from accel.adapters.common.floor import learned, values
from accel.scope import WrappedRun

ENGINE = EngineSpec("llm", ("http://fake/v1", "m"), lambda: None)
DOC = "heapq.heappush(heap, item): push the value item onto the heap, keeping the heap invariant."
QUESTION = "How do I push onto a heap?"


class Program:
    """A fake program: retrieve, then `grades` sequential LLM calls, then an answer whose prompt
    quotes the passage and the last grade."""

    def __init__(self, model: learned.ProgramModel) -> None:
        self.model = model
        self.sent: list[tuple[str, int]] = []

    def run(self, question: str, doc: str, *, node: str = "n", answer_prefix: str = "Context:\n") -> learned.RunRecorder:
        recorder = self.model.start(WrappedRun(app="fake"), lambda: (node, f"{node}:task"), {"question": question})
        recorder._launch = lambda warms, values: self.sent.extend((str(w.site), w.parts) for w in warms)
        search = recorder.site("vectordb")
        recorder.results(search, [doc])
        grade = recorder.site("llm")
        recorder.llm_request(grade, f"Grade this: {doc}", ENGINE)
        recorder.llm_response(grade, "the grade says yes, relevant", None)
        answer = recorder.site("llm")
        recorder.llm_request(answer, f"{answer_prefix}{doc}\nGrade: the grade says yes, relevant\nQ: {question}", ENGINE)
        recorder.llm_response(answer, "an answer", None)
        recorder.end()
        return recorder


@pytest.fixture
def program() -> Program:
    return Program(learned.ProgramModel("fake"))


def test_the_first_run_teaches_and_the_next_ones_warm_the_prefix_known_early(program):
    program.run(QUESTION, DOC)
    assert program.sent == []  # nothing known before the first run
    program.run("How do I pop the smallest item?", "heapq.heappop(heap): pop and return the smallest item, keeping the invariant.")
    # the answer's prompt: "Context:\n" + passage + "\nGrade: " + grade text + ...; after the
    # search, its first two parts are known while the grade is still to come
    assert program.sent == [("llm:n/0#1", 3)]
    model = program.model.sites
    answer = next(m for s, m in model.items() if s.ordinal == 1)
    assert answer.learned.slots() == ["vectordb:n/0#0[0]", "llm:n/0#0", "input.question"]


def test_a_call_whose_prompt_is_known_and_made_at_once_is_not_warmed(program):
    for _ in range(3):
        program.run(QUESTION, DOC)
    assert all(site != "llm:n/0#0" for site, _ in program.sent)  # the grade follows the search at once


def test_a_changed_pattern_is_learned_again_and_warmed_only_as_far_as_it_held(program):
    program.run(QUESTION, DOC)
    program.run(QUESTION, DOC, answer_prefix="Run 2 context:\n")
    answer = next(m for s, m in program.model.sites.items() if s.ordinal == 1)
    assert answer.verified == 0 and answer.relearned == 1
    program.sent.clear()
    program.run(QUESTION, DOC, answer_prefix="Run 3 context:\n")
    assert program.sent == []  # the last run repeated nothing of it: nothing to warm
    assert "not warmed: no run value in its verified prefix" in "\n".join(program.model.explain())


def test_warm_ups_not_found_in_the_cache_stop_the_site(program):
    program.run(QUESTION, DOC)
    site = next(s for s in program.model.sites if s.ordinal == 1)
    for _ in range(learned.MAX_MISSES):
        program.model.cache_report(site, warmed=256, cached=0)
    assert program.model.sites[site].stopped
    program.sent.clear()
    program.run(QUESTION, DOC)
    assert program.sent == []


def test_a_site_called_twice_in_one_run_is_not_warmed(program):
    recorder = program.model.start(WrappedRun(app="fake"), lambda: ("loop", "loop:1"), {})
    recorder.llm_request(learned.Site("loop", 0, "llm", 0), "x" * 40, ENGINE)
    recorder._called[learned.Site("loop", 0, "llm", 0)] += 1
    recorder.end()
    assert program.model.targets() == []
    assert "called more than once" in "\n".join(program.model.explain())


def test_sites_tell_visits_of_a_node_apart():
    task = ["a:1"]
    recorder = learned.ProgramModel("fake").start(WrappedRun(app="fake"), lambda: ("a", task[0]), {})
    first, second = recorder.site("llm"), recorder.site("llm")
    task[0] = "a:2"  # the node runs again (a loop): a second visit, its calls counted afresh
    third = recorder.site("llm")
    assert [(s.visit, s.ordinal) for s in (first, second, third)] == [(0, 0), (0, 1), (1, 0)]


def test_request_prompts_and_response_texts_are_read_as_the_server_sees_them():
    chat = {"model": "m", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], "max_tokens": 8}
    assert values.request_prompt(json.dumps(chat).encode()) == chat["messages"]
    assert values.request_prompt(json.dumps({**chat, "tools": []}).encode()) is None  # the template renders tools
    assert values.request_prompt(json.dumps({"model": "m", "prompt": ["P"]}).encode()) == "P"
    assert values.request_prompt(json.dumps({"model": "m", "prompt": [1, 2]}).encode()) is None
    body = {"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens_details": {"cached_tokens": 128}}}
    assert values.response_text(json.dumps(body).encode()) == ("hi", 128)
    events = b'data: {"choices":[{"index":0,"delta":{"content":"h"}}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":"i"}}]}\n\n' \
             b'data: {"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":0}}}\n\ndata: [DONE]\n\n'
    assert values.stream_text(events) == ("hi", 0)


def test_input_values_are_the_text_leaves_of_the_input():
    class Message:
        content = "a message long enough to be a value"

    found = values.of_input({"question": QUESTION, "messages": [Message()], "k": 3, "short": "hi"})
    assert found == {"input.question": QUESTION, "input.messages[0].content": Message.content}


def test_a_failing_warm_up_is_counted_and_leaves_the_run_alone(program):
    import concurrent.futures

    from accel.engines.errors import EngineError

    program.run(QUESTION, DOC)
    recorder = program.model.start(WrappedRun(app="fake"), None, {})
    failed: concurrent.futures.Future[None] = concurrent.futures.Future()
    failed.set_exception(EngineError("vllm-openai", "the server went away", "restart it"))
    recorder._done(failed)  # what the warm-up task's completion reports; nothing is raised
    assert program.model.failed_warmups == 1
    assert "warm-ups that failed (no effect on runs): 1" in "\n".join(program.model.explain())


def test_ending_a_run_cancels_its_warm_ups_in_flight(program):
    import concurrent.futures

    recorder = program.model.start(WrappedRun(app="fake"), None, {})
    pending: concurrent.futures.Future[None] = concurrent.futures.Future()
    recorder._futures.add(pending)
    recorder.end()
    assert pending.cancelled()
    assert program.model.finished == 1
