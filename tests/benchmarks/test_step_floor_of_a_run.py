"""The batch bound's step floor from a run's own calls (benchmarks/step_floor.py:run_floor): each
timed LLM call's usage as its response reports it (benchmarks/call_usage.py), equal requests
counted once, prompts never charged above what a system was seen to compute."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accel.benchmarks.call_usage import CallUsage, from_langchain, from_llamaindex
from accel.benchmarks.drivers import LangChainDriver
from accel.benchmarks.step_floor import Chain, run_floor, step_floor
from accel.engines.twin.profile import load_profile

TWIN = load_profile("h100-8b")
COST, CONFIG = TWIN.llm, TWIN.llm_config


def sequential(n: int) -> list[int]:
    return [1] * n


def test_the_langchain_timer_records_each_calls_usage_and_request() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    answers = [AIMessage(content=text, usage_metadata={"input_tokens": 120, "output_tokens": 9, "total_tokens": 129,
                                                       "input_token_details": {"cache_read": 48}})
               for text in ("one", "two", "three")]
    model = GenericFakeChatModel(messages=iter(answers))
    with LangChainDriver().timing() as timer:
        model.invoke("the same question")
        model.invoke("the same question")
        model.invoke("another question")
    first, again, other = timer.usage()
    assert len(timer.durations()) == 3
    assert (first.prompt_tokens, first.cached_tokens, first.completion_tokens, first.computed_tokens) == (120, 48, 9, 72)
    assert first.request == again.request != other.request


def test_usage_is_read_from_the_openai_shapes_of_either_framework() -> None:
    token_usage = {"prompt_tokens": 300, "completion_tokens": 32, "prompt_tokens_details": {"cached_tokens": 256}}
    assert from_langchain(SimpleNamespace(generations=[], llm_output={"token_usage": token_usage}), "r") == CallUsage(300, 256, 32, "r")
    as_object = SimpleNamespace(usage=SimpleNamespace(prompt_tokens=300, completion_tokens=32, prompt_tokens_details=None))
    assert from_llamaindex(SimpleNamespace(raw=as_object), "r") == CallUsage(300, 0, 32, "r")
    assert from_llamaindex(SimpleNamespace(raw={"usage": token_usage}), "r") == CallUsage(300, 256, 32, "r")
    # a stream without usage: nothing to count
    assert from_llamaindex(SimpleNamespace(raw={"choices": []}), "r") is None
    assert from_langchain(SimpleNamespace(generations=[], llm_output=None), "r") is None


def _queries(n: int, request: str = "") -> list[list[CallUsage | None]]:
    return [[CallUsage(400, 100, 32, f"{request}{q}.{i}" if request else "") for i in range(3)] for q in range(n)]


def test_a_runs_floor_is_the_step_floor_of_its_calls_by_level() -> None:
    floor = run_floor(_queries(8, "q"), sequential, COST, CONFIG)
    chains = [Chain((((300, 32),), ((300, 32),), ((300, 32),)))] * 8
    assert floor["value_s"] == pytest.approx(step_floor(chains, COST, CONFIG))
    assert (floor["calls"], floor["distinct_calls"], floor["computed_tokens"], floor["answer_tokens"]) == (24, 24, 7200, 768)
    # the levels matter: three calls side by side need a third of the steps in a row
    assert run_floor(_queries(8, "q"), lambda n: [n], COST, CONFIG)["value_s"] < floor["value_s"]


def test_beside_the_floor_a_run_reports_its_calls_sent_when_ready_which_the_floor_never_beats() -> None:
    """`as_sent_s`: the same chains on the LLM twin alone, each call sent when its level is
    ready: one schedule, so never under the floor; fan-in levels finish sooner than in a row."""
    from accel.benchmarks.llm_schedule import makespan_as_sent

    def sent(chains: list[Chain]) -> float:
        return makespan_as_sent(chains, COST, CONFIG)
    floor = run_floor(_queries(8, "q"), sequential, COST, CONFIG, as_sent=sent)
    chains = [Chain((((300, 32),), ((300, 32),), ((300, 32),)))] * 8
    assert floor["as_sent_s"] == pytest.approx(sent(chains))
    assert floor["value_s"] <= floor["as_sent_s"]
    side_by_side = run_floor(_queries(8, "q"), lambda n: [n], COST, CONFIG, as_sent=sent)
    assert side_by_side["as_sent_s"] < floor["as_sent_s"]
    assert run_floor(_queries(8, "q"), sequential, COST, CONFIG)["as_sent_s"] is None  # asked for only on twins


def test_equal_requests_count_once_and_the_prompts_never_exceed_what_a_system_computed() -> None:
    distinct = run_floor(_queries(8, "q"), sequential, COST, CONFIG)
    repeated = run_floor([[CallUsage(400, 100, 32, f"same.{i}") for i in range(3)] for _ in range(8)], sequential,
                         COST, CONFIG)
    assert repeated["distinct_calls"] == 3 and repeated["value_s"] < distinct["value_s"]
    capped = run_floor(_queries(8, "q"), sequential, COST, CONFIG, computed_cap=3600)
    assert capped["computed_tokens"] <= 3600 and capped["prompt_scale"] == pytest.approx(0.5)
    assert capped["value_s"] < distinct["value_s"]
    assert run_floor(_queries(8, "q"), sequential, COST, CONFIG, computed_cap=10**6)["value_s"] == distinct["value_s"]


def test_no_floor_where_a_query_failed_or_a_call_reported_no_usage() -> None:
    assert run_floor([*_queries(3, "q"), []], sequential, COST, CONFIG) is None
    assert run_floor([*_queries(3, "q"), [None]], sequential, COST, CONFIG) is None
    assert run_floor([], sequential, COST, CONFIG) is None


def test_a_queries_encoder_calls_go_after_the_last_level_begun_when_they_arrived() -> None:
    from accel.benchmarks.step_floor import Stage, with_stages

    chain = Chain((((300, 32),), ((300, 32),), ((300, 32),)))
    embed, rerank, late = Stage("embed", 1, 12), Stage("rerank", 30, 190), Stage("embed", 2, 12)
    placed = with_stages(chain, [1.0, 2.0, 3.0], [(1.5, rerank), (0.5, embed), (1.0, late), (3.5, embed)])
    assert placed.first == (embed,)
    assert placed.stages == ((late, rerank), (), (embed,))  # in arrival order; one beside level 0 waits for it
    assert placed.levels == chain.levels


def test_with_the_lone_queries_encoder_calls_the_schedule_queues_them_on_the_devices() -> None:
    """`as_sent_encoders_s`: the same chains with each query's logged encoder calls between its
    levels, queued on the twin's devices: never sooner than the LLM alone, later by the device's
    time where every query waits for a big rerank; no calls, the same figure."""
    from accel.benchmarks.llm_schedule import encoder_devices, makespan_as_sent
    from accel.benchmarks.step_floor import EncoderWork, Stage

    def sent(chains: list[Chain]) -> float:
        return makespan_as_sent(chains, COST, CONFIG, encoder_devices(TWIN))
    queries = _queries(8, "q")
    rerank = [EncoderWork((0.0, 1.0, 2.0), ((0.5, Stage("rerank", 400, 480)),)) for _ in queries]
    floor = run_floor(queries, sequential, COST, CONFIG, as_sent=sent, encoders=rerank)
    one_call = TWIN.rerank.cost_of([480] * 400)
    assert floor["encoder_calls"] == 8
    # one device: the eight calls run in a row, and the last query's two later levels (32 tokens
    # each, every step at least the weight-read floor) wait for the last of them
    assert floor["as_sent_encoders_s"] >= 8 * one_call + 2 * 32 * COST.floor_s
    assert floor["as_sent_encoders_s"] > floor["as_sent_s"]
    idle = run_floor(queries, sequential, COST, CONFIG, as_sent=sent, encoders=[EncoderWork((0.0, 1.0, 2.0), ())] * 8)
    assert idle["as_sent_encoders_s"] == pytest.approx(idle["as_sent_s"])
    assert run_floor(queries, sequential, COST, CONFIG, as_sent=sent, encoders=rerank[:3])["as_sent_encoders_s"] is None
    assert run_floor(queries, sequential, COST, CONFIG, as_sent=sent)["as_sent_encoders_s"] is None


def test_a_sequential_batch_run_records_when_each_query_and_its_calls_ran() -> None:
    """The twins' call logs are split by these windows (`twin_run.lone_encoder_work`): one per
    query, in query order, None where it failed, its LLM calls inside it."""
    import contextlib
    import threading

    from accel.benchmarks.drivers import LLMTimes
    from accel.benchmarks.runner import run_system
    from accel.benchmarks.systems import System

    class Driver:
        framework = "fake"
        local = threading.local()

        def call(self, app, question):
            timer = getattr(self.local, "timer", None) or LLMTimes()  # the warm-up runs untimed
            timer.start(question)  # perf_counter's nanoseconds move between two stamps: no wait needed
            timer.end(question)
            if question == "fails":
                raise RuntimeError("the app failed")
            return question

        @contextlib.contextmanager
        def timing(self):
            self.local.timer = LLMTimes()
            yield self.local.timer

    system = System("stock-sequential", build=lambda apps: object(), concurrent=False)
    run = run_system(system, None, Driver(), ["a", "fails", "b"], "batch")
    first, failed, last = run.lone_spans
    assert failed is None and first.end <= last.start
    for span in (first, last):
        [(began, ended)] = span.llm
        assert span.start <= began < ended <= span.end
