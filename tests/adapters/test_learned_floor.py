"""Learned prefill's bookkeeping, driven through the session's door as the floor drives it
(`Session.learner`, `learner.start`, `Session.call` with `EngineCall`s), on fake engines
(FakeEngine / FakeLLMEngine: warm-up policy unit tests only): which sites a run warms, when,
and when a site stops being warmed. The warm-up itself (`RunRecorder._launch`) is replaced by
a list that records what would be sent."""

from __future__ import annotations

import json
import uuid

import pytest

from accel.adapters.common.bindings import EngineSpec
from accel.adapters.common.floor import values
from accel.engines.base import GenerationRequest, SamplingParams, SearchHit
from accel.ir.dynamic import Site
from accel.options import WrapOptions
from accel.scope import WrappedRun
from accel.session import Session
from accel.testing.fakes import FakeEngine, FakeLLMEngine
from accel.types import EngineCall

DOC = "heapq.heappush(heap, item): push the value item onto the heap, keeping the heap invariant."
QUESTION = "How do I push onto a heap?"
GRADE = "the grade says yes, relevant"


@pytest.fixture
def session():
    session = Session()
    yield session
    session.shutdown()


class Program:
    """A fake program: retrieve, then an LLM grade, then an answer whose prompt quotes the
    passage and the grade; its calls go through `session.call` as the floor makes them."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.model = session.learner("fake", WrapOptions().disabled_passes)
        key = uuid.uuid4().hex
        self.llm = FakeLLMEngine(reply=lambda request: GRADE if request.prompt.startswith("Grade") else "an answer")
        self.llm_spec = EngineSpec("llm", ("fake-llm", key), lambda: self.llm)
        self.store_spec = EngineSpec("vectordb", ("fake-store", key),
                                     lambda: FakeEngine("fake-store", compute=lambda doc: [SearchHit("0", doc, 1.0)]))
        self.sent: list[tuple[str, int]] = []

    def ask(self, run: WrappedRun, prompt: str) -> str:
        call = EngineCall(self.llm_spec, [GenerationRequest(prompt=prompt, params=SamplingParams(max_tokens=8))], "fake-llm",
                          shape=lambda results: results[0].text, prompt=prompt, answer=lambda generation: (generation.text, None))
        return self.session.call(run, call)

    def run(self, question: str, doc: str, *, node: str = "n", answer_prefix: str = "Context:\n") -> WrappedRun:
        run = WrappedRun(app="fake", session=self.session)
        end = self.model.start(run, lambda: (node, f"{node}:task"), values.of_input({"question": question}))
        run.recorder._launch = lambda warms, values: self.sent.extend((str(w.site), w.parts) for w in warms)
        found = self.session.call(run, EngineCall(self.store_spec, [doc], "fake-store", shape=lambda results: results[0]))
        assert [hit.text for hit in found] == [doc]
        grade = self.ask(run, f"Grade this: {doc}")
        assert self.ask(run, f"{answer_prefix}{doc}\nGrade: {grade}\nQ: {question}") == "an answer"
        end()
        return run


@pytest.fixture
def program(session) -> Program:
    return Program(session)


def test_the_first_run_teaches_and_the_next_ones_warm_the_prefix_known_early(program):
    program.run(QUESTION, DOC)
    assert program.sent == []  # nothing known before the first run
    program.run("How do I pop the smallest item?", "heapq.heappop(heap): pop and return the smallest item, keeping the invariant.")
    # the answer's prompt: "Context:\n" + passage + "\nGrade: " + grade text + ...; after the
    # search, its first two parts are known while the grade is still to come
    assert program.sent == [("llm:n/0#1", 3)]
    answer = next(m for s, m in program.model.sites.items() if s.ordinal == 1)
    assert answer.learned.slots() == ["vectordb:n/0#0[0]", "llm:n/0#0", "input.question"]
    assert len(program.llm.requests) == 4  # the program's own requests went out unchanged
    assert all(r.request_id.startswith("program") and "/fake-llm#" in r.request_id for r in program.llm.requests)


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
    for _ in range(3):  # MAX_MISSES
        program.model.cache_report(site, warmed=256, cached=0)
    assert program.model.sites[site].stopped
    program.sent.clear()
    program.run(QUESTION, DOC)
    assert program.sent == []


def test_a_site_called_twice_in_one_run_is_not_warmed(program):
    run = WrappedRun(app="fake", session=program.session)
    end = program.model.start(run, lambda: ("loop", "loop:1"), {})
    loop = Site("loop", 0, "llm", 0)
    run.recorder.llm_request(loop, "x" * 40, "llm0")
    run.recorder.llm_request(loop, "x" * 40, "llm0")
    end()
    assert program.model.targets() == []
    assert "called more than once" in "\n".join(program.model.explain())


def test_sites_tell_visits_of_a_node_apart(program):
    task = ["a:1"]
    run = WrappedRun(app="fake", session=program.session)
    program.model.start(run, lambda: ("a", task[0]), {})
    first, second = run.recorder.site("llm"), run.recorder.site("llm")
    task[0] = "a:2"  # the node runs again (a loop): a second visit, its calls counted afresh
    third = run.recorder.site("llm")
    assert [(s.visit, s.ordinal) for s in (first, second, third)] == [(0, 0), (0, 1), (1, 0)]


def test_learning_is_off_where_the_options_disable_the_pass(session):
    assert session.learner("fake", WrapOptions(disabled_passes=["learned_prefill"]).disabled_passes) is None
    assert Session(disabled_passes=["learned_prefill"]).learner("fake") is None


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
    run = WrappedRun(app="fake", session=program.session)
    program.model.start(run, None, {})
    failed: concurrent.futures.Future[None] = concurrent.futures.Future()
    failed.set_exception(EngineError("vllm-openai", "the server went away", "restart it"))
    run.recorder._done(failed)  # what the warm-up task's completion reports; nothing is raised
    assert program.model.failed_warmups == 1
    assert "warm-ups that failed (no effect on runs): 1" in "\n".join(program.model.explain())


def test_ending_a_run_cancels_its_warm_ups_in_flight(program):
    import concurrent.futures

    run = WrappedRun(app="fake", session=program.session)
    end = program.model.start(run, None, {})
    pending: concurrent.futures.Future[None] = concurrent.futures.Future()
    run.recorder._futures.add(pending)
    end()
    assert pending.cancelled()
    assert program.model.finished == 1
