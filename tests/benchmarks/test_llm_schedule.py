"""The LLM-alone reference (benchmarks/llm_schedule.py): the twin's own scheduler and step model
with no wall clock, so every figure follows from the profile's arithmetic."""

from __future__ import annotations

import pytest

from accel.benchmarks.llm_schedule import Chain, latencies, workload
from accel.engines.twin.profile import load_profile

PROFILE = load_profile("h100-8b")
COST, CONFIG = PROFILE.llm, PROFILE.llm_config


def _alone(prompt: int, out: int) -> float:
    """One request alone: a prefill step that samples the first token, then a decode step per
    further token over a growing context."""
    total = COST.step_s(prompt, 1, 0, 0, prompt * prompt / 2)
    for made in range(1, out):
        total += COST.step_s(0, 0, 1, prompt + made)
    return total


def test_a_lone_chain_costs_its_steps_and_its_delays() -> None:
    chain = Chain((((200, 5),), ((300, 4),)), (0.05,))
    [latency] = latencies([chain], [0.0], COST, CONFIG)
    assert latency == pytest.approx(_alone(200, 5) + 0.05 + _alone(300, 4))


def test_chains_sent_together_batch_but_pay_for_each_other_s_prefill() -> None:
    chain = Chain((((400, 30),), ((400, 30),)))
    [alone] = latencies([chain], [0.0], COST, CONFIG)
    together = latencies([chain] * 32, [0.0] * 32, COST, CONFIG)
    assert max(together) < 32 * alone / 10  # decode steps batch: far faster than one after another
    assert max(together) > alone + 31 * 400 * COST.per_token_s  # but the others' prompts fill its steps
    later = latencies([chain, chain], [0.0, 100.0], COST, CONFIG)
    assert later == pytest.approx([alone, alone])  # far apart: each alone


def test_a_cap_holds_prompts_until_those_in_flight_are_prefilled() -> None:
    chains = workload("advanced RAG LangChain", 8)
    assert latencies(chains, [0.0] * 8, COST, CONFIG, cap=10_000) == latencies(chains, [0.0] * 8, COST, CONFIG)
    two = [Chain((((400, 3),),))] * 2
    first, second = latencies(two, [0.0, 0.0], COST, CONFIG, cap=400)
    assert second > first  # one prompt at a time: the second waits for the first's prefill
    both = latencies(two, [0.0, 0.0], COST, CONFIG)
    assert both[0] == both[1] and first < both[0] < second  # uncapped: prefilled in one step together
