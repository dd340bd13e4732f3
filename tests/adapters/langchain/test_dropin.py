"""`accel.wrap(runnable)` is a drop-in of the chain's own class (issue 28), and composes like a
step: wherever LangChain puts it (`fast | parser`, `parser | fast`, `seq | fast`, a dict in
front, `with_config`, `bind`, `with_retry`, `with_fallbacks`, a `RunnableParallel`), the
composition answers as the same composition of the stock chain, and it does so through the
drop-in's accelerated entry points (the wrap's `LoweredChain`), never by splicing the
original's steps into a plain sequence. Real engines (the tiny model behind the proxy)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableBinding, RunnableLambda, RunnableParallel, RunnablePassthrough, RunnableSequence

import accel
from accel.adapters.common.dropin import state_of
from accel.adapters.langchain.runnable import LoweredChain

pytestmark = [pytest.mark.engines, pytest.mark.slow]

PROMPT = ChatPromptTemplate.from_messages([("system", "Answer briefly."), ("human", "{question}")])
QUESTION = {"question": "What does heapq do?"}


def chain_run(fast: Any, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the calls of the drop-in's lowered entry points (its `LoweredChain`'s)."""
    chain = state_of(fast).helper
    assert isinstance(chain, LoweredChain) and chain.lowered
    calls: Counter[str] = Counter()
    for name in ("invoke", "ainvoke", "stream", "astream", "batch", "abatch"):
        monkeypatch.setattr(chain, name, _counting(calls, name, getattr(chain, name)))
    return calls


def _counting(calls: Counter[str], name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def count(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return method(*args, **kwargs)

    return count


@pytest.fixture
def chain(chat_model: Any) -> RunnableSequence:
    return PROMPT | chat_model | StrOutputParser()


def test_the_drop_in_is_one_of_the_chains_class_and_leaves_the_original_alone(chain: RunnableSequence) -> None:
    before = dict(chain.__dict__)
    fast = accel.wrap(chain)
    assert isinstance(fast, RunnableSequence) and type(fast) is not RunnableSequence and type(chain) is RunnableSequence
    assert accel.wrap(fast) is fast and state_of(chain) is None
    assert chain.__dict__ == before and all(chain.__dict__[k] is v for k, v in before.items())
    assert fast.first is chain.first and fast.last is chain.last  # a shallow copy: the same components
    assert fast.original is chain and fast.lowered and fast.template is state_of(fast).template
    assert fast.get_graph().draw_ascii() == chain.get_graph().draw_ascii()
    assert fast.get_input_schema().model_json_schema() == chain.get_input_schema().model_json_schema()
    assert fast.to_json() == chain.to_json()


def test_compositions_run_the_drop_ins_entry_points_and_answer_as_stock(chain: RunnableSequence,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fast = accel.wrap(chain)
    calls = chain_run(fast, monkeypatch)
    shout, ask = RunnableLambda(str.upper), RunnableLambda(lambda q: {"question": q})
    before = RunnableLambda(lambda q: q.strip()) | RunnableLambda(lambda q: {"question": q})
    compositions: dict[str, Callable[[Any], Any]] = {  # the same composition over a given chain
        "fast | parser": lambda c: c | shout,
        "parser | fast": lambda c: ask | c,  # Runnable.__or__: RunnableSequence(ask, c) flattens sequences
        "seq | fast": lambda c: before | c,  # RunnableSequence.__or__, unless c's __ror__ goes first
        "dict | fast": lambda c: {"question": RunnablePassthrough()} | c,
        "pipe": lambda c: ask.pipe(c, shout),
        "with_config": lambda c: c.with_config(tags=["mine"], run_name="named"),
        "bind": lambda c: c.bind(unused=1),  # the prompt's stock invoke drops kwargs
        "with_retry": lambda c: c.with_retry(stop_after_attempt=2),
        "with_fallbacks": lambda c: c.with_fallbacks([RunnableLambda(lambda _: "fallback")]),
        "parallel": lambda c: RunnableParallel({"a": c, "b": RunnableLambda(lambda x: x["question"])}),
    }
    for name, compose in compositions.items():
        ours, stock = compose(fast), compose(chain)
        question = QUESTION["question"] if name in ("parser | fast", "seq | fast", "dict | fast", "pipe") else QUESTION
        if isinstance(ours, RunnableSequence):
            assert fast in ours.steps and chain.first not in ours.steps, f"{name}: {ours.steps}"
        calls.clear()
        assert ours.invoke(question) == stock.invoke(question), name
        assert calls == {"invoke": 1}, f"{name}: {calls}"
    calls.clear()
    composed = ask | fast | shout
    assert list(composed.stream(QUESTION["question"])) == list((ask | chain | shout).stream(QUESTION["question"]))
    assert calls == {"stream": 1}  # a sequence streams each step's `transform`: the drop-in's is Runnable's, on stream
    calls.clear()
    assert composed.batch([QUESTION["question"]] * 2) == (ask | chain | shout).batch([QUESTION["question"]] * 2)
    assert calls == {"batch": 1, "invoke": 2}  # the drop-in's batch: `Runnable.batch` over its own invoke
    calls.clear()
    assert asyncio.run(composed.ainvoke(QUESTION["question"])) == asyncio.run((ask | chain | shout).ainvoke(QUESTION["question"]))
    assert calls == {"ainvoke": 1}


def test_a_binding_drop_in_composes_around_itself(chat_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A binding's own `bind` / `with_config` build another instance of its class around the
    same bound: on a drop-in they wrap the drop-in instead, so the new config applies."""
    bound = chat_model.bind(stop=["\n"])
    fast = accel.wrap(bound)
    assert isinstance(fast, type(bound)) and type(fast) is not type(bound)
    calls = chain_run(fast, monkeypatch)
    configured = fast.with_config(tags=["mine"])
    assert type(configured) is RunnableBinding and configured.bound is fast
    prompt_value = PROMPT.invoke(QUESTION)
    assert configured.invoke(prompt_value).content == bound.with_config(tags=["mine"]).invoke(prompt_value).content
    assert calls == {"invoke": 1}


def test_a_model_drop_in_is_one_step_of_a_stock_chain(chat_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fast_model = accel.wrap(chat_model)
    assert isinstance(fast_model, type(chat_model)) and fast_model.model_name == chat_model.model_name
    calls = chain_run(fast_model, monkeypatch)
    ours, stock = PROMPT | fast_model | StrOutputParser(), PROMPT | chat_model | StrOutputParser()
    assert ours.steps[1] is fast_model
    assert ours.invoke(QUESTION) == stock.invoke(QUESTION)
    assert calls == {"invoke": 1}


def test_a_drop_in_inside_a_wrapped_chain_runs_as_one_opaque_step(chain: RunnableSequence, monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrapping a composition that holds a drop-in: the drop-in is one step there (not lowered
    into the outer template: it runs its own), and the outer answers as stock."""
    fast = accel.wrap(chain)
    calls = chain_run(fast, monkeypatch)
    shout = RunnableLambda(str.upper)
    outer = accel.wrap(fast | shout)
    assert "an accel.wrap drop-in" in outer.explain()
    assert outer.invoke(QUESTION) == (chain | shout).invoke(QUESTION)
    assert calls == {"invoke": 1}


def test_accel_batch_finds_the_chain_through_its_drop_in_state(chain: RunnableSequence) -> None:
    """`accel.batch` reads the drop-in's state: the chain's own batch, in a share scope over the
    wrap's template that reports to the wrap's counters; an app accel.wrap did not return is
    refused with the remedy."""
    fast = accel.wrap(chain)
    state = state_of(fast)
    assert state.own_batch and state.template is fast.template and state.counters is fast.counters
    inputs = [QUESTION, {"question": "What is json?"}, QUESTION]
    assert accel.batch(fast, inputs) == chain.batch(inputs)
    assert any(n > 0 for name, n in fast.counters.items() if "shared" in name), fast.counters
    assert asyncio.run(accel.abatch(fast, inputs)) == chain.batch(inputs)
    with pytest.raises(TypeError, match=r"accel.batch\(accel.wrap\(app\), inputs\)"):
        accel.batch(chain, inputs)
