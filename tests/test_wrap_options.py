"""`accel.wrap`'s options: one typed `WrapOptions` for every adapter, checked at wrap time,
and an option an adapter has no use for is logged, not dropped in silence."""

from __future__ import annotations

import logging

import pytest

import accel
from accel.options import OptionsError, WrapOptions


def test_a_typo_fails_at_wrap_time_naming_the_choices() -> None:
    with pytest.raises(OptionsError, match=r"unknown policy 'fast'.*\['po', 'to', 'topology'\]"):
        accel.wrap(object(), policy="fast")
    with pytest.raises(OptionsError, match=r"unknown pass\(es\) \['prefil_split'\].*prefill_split"):
        accel.wrap(object(), disabled_passes=["prefil_split"])
    with pytest.raises(TypeError):
        accel.wrap(object(), polcy="po")  # not an option at all


def test_keywords_override_an_options_object() -> None:
    base = WrapOptions(policy="po", disabled_passes=("prefill_split",))
    assert WrapOptions.of(base, fallback=False) == WrapOptions("po", ("prefill_split",), False)
    assert WrapOptions.of(base, disabled_passes=[]).disabled_passes == ()
    assert WrapOptions.of(None) == WrapOptions() and WrapOptions().non_default() == []


def test_the_langchain_adapter_gets_every_option() -> None:
    from langchain_core.runnables import RunnableLambda

    chain = RunnableLambda(lambda x: x + 1) | RunnableLambda(lambda x: x * 2)
    fast = accel.wrap(chain, WrapOptions(fallback=False))
    assert fast.fallback is False and fast.invoke(1) == chain.invoke(1) == 4
    assert accel.wrap(chain).fallback is True


def test_an_option_the_adapter_does_not_use_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        n: int

    builder = StateGraph(State)
    builder.add_node("inc", lambda state: {"n": state["n"] + 1})
    builder.add_edge(START, "inc")
    builder.add_edge("inc", END)
    graph = builder.compile()
    with caplog.at_level(logging.WARNING, logger="accel.wrap"):
        fast = accel.wrap(graph, disabled_passes=["prefill_split"], fallback=False)
    assert fast.invoke({"n": 1}) == {"n": 2}
    assert "langgraph adapter does not use option(s) ['disabled_passes', 'fallback']" in caplog.text
