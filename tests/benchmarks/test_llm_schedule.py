"""The LLM-alone reference (benchmarks/llm_schedule.py): the twin's own scheduler and step model
with no wall clock, so every figure follows from the profile's arithmetic."""

from __future__ import annotations

import pytest

import dataclasses

from accel.benchmarks.llm_schedule import SHAPES, Chain, Stage, latencies, step_floor, workload
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


def test_an_encoder_stage_costs_its_call_on_the_device_and_nothing_without_one() -> None:
    rerank = Stage("rerank", 31, 190)
    chain = Chain((((200, 5),), ((300, 4),)), (0.004,), ((rerank,),))
    encoders = {"rerank": PROFILE.rerank}
    [staged] = latencies([chain], [0.0], COST, CONFIG, encoders=encoders)
    assert staged == pytest.approx(_alone(200, 5) + 0.004 + PROFILE.rerank.call_s(31, 190) + _alone(300, 4))
    bare = Chain(chain.levels, chain.delays)
    assert latencies([chain], [0.0], COST, CONFIG) == latencies([bare], [0.0], COST, CONFIG)


def test_an_encoder_stage_before_the_first_level_holds_it_back() -> None:
    """A query's own embedding before its first prompt (naive RAG, map-reduce's retrieval)."""
    embed = Stage("embed", 1, 12)
    chain = Chain((((200, 5),),), first=(embed,))
    [staged] = latencies([chain], [0.0], COST, CONFIG, encoders={"embed": PROFILE.embed})
    assert staged == pytest.approx(PROFILE.embed.call_s(1, 12) + _alone(200, 5))
    [later] = latencies([chain], [2.0], COST, CONFIG, encoders={"embed": PROFILE.embed})
    assert later == pytest.approx(staged)  # counted from its arrival


def test_an_encoder_busy_with_one_call_serves_everything_that_waited_in_its_next() -> None:
    slow = {"rerank": dataclasses.replace(PROFILE.rerank, host_s=1.0)}  # every call takes 1 s
    assert slow["rerank"].call_s(64, 190) == pytest.approx(1.0)
    chain = Chain((((100, 2),), ((100, 2),)), (), ((Stage("rerank", 1, 190),),))
    arrivals = [0.0, 0.1, 0.2]
    first, second, third = (at + latency for at, latency in
                            zip(arrivals, latencies([chain] * 3, arrivals, COST, CONFIG, encoders=slow)))
    assert second == pytest.approx(third)  # both waited for the first call, then shared one
    assert second - first == pytest.approx(1.0, abs=0.05)
    one_each = latencies([chain] * 3, arrivals, COST, CONFIG, encoders=slow, max_items=1)
    assert arrivals[2] + one_each[2] - (arrivals[1] + one_each[1]) == pytest.approx(1.0, abs=0.05)


def test_the_advanced_rags_queue_their_encoder_stages_behind_each_other() -> None:
    from accel.benchmarks.llm_schedule import shape_as_sent

    encoders = {"embed": PROFILE.embed, "rerank": PROFILE.rerank}
    for name in ("advanced RAG LangChain", "advanced RAG LlamaIndex"):
        shape = SHAPES[name]
        lone_stages = sum(PROFILE.embed.call_s(s.items, s.tokens) if s.device == "embed" else
                          PROFILE.rerank.call_s(s.items, s.tokens) for s in shape.stages)
        alone = max(latencies(workload(name, 1, encoders=True), [0.0], COST, CONFIG, encoders=encoders))
        bare = max(latencies(workload(name, 1), [0.0], COST, CONFIG))
        assert alone - bare == pytest.approx(lone_stages + shape.other_s - shape.delay_s)
        rerank_work = PROFILE.rerank.call_s(1024, shape.stages[-1].tokens) * shape.queries * shape.stages[-1].items / 1024
        batch = shape_as_sent(name, "batch", COST, CONFIG, encoders=encoders)
        assert batch > shape_as_sent(name, "batch", COST, CONFIG) and batch > rerank_work
    assert shape_as_sent("research graph", "batch", COST, CONFIG, encoders=encoders) == \
        shape_as_sent("research graph", "batch", COST, CONFIG)  # no encoder stages: the same figure


@pytest.mark.parametrize("profile", ["h100-8b", "cpu-reference"])
def test_no_schedule_the_twin_runs_beats_the_step_floor(profile: str) -> None:
    twin = load_profile(profile)
    small = dataclasses.replace(twin.llm_config, max_num_batched_tokens=512)
    for name in SHAPES:
        for seed in range(2):
            chains = workload(name, 8, seed=seed)
            for config, cap in ((twin.llm_config, None), (twin.llm_config, 512), (small, None)):
                makespan = max(latencies(chains, [0.0] * len(chains), twin.llm, config, cap=cap))
                assert step_floor(chains, twin.llm, config) <= makespan * (1 + 1e-9), (name, seed, cap)


def test_the_step_floor_is_exact_for_one_prefill_and_charges_every_prompt_of_a_batch() -> None:
    one = [Chain((((300, 1),),))]
    assert step_floor(one, COST, CONFIG) == pytest.approx(latencies(one, [0.0], COST, CONFIG)[0])
    heavy = [Chain((((2000, 4),),))] * 32  # prefill-heavy: the decode's batch gain does not help
    [alone] = latencies(heavy[:1], [0.0], COST, CONFIG)
    floor = step_floor(heavy, COST, CONFIG)
    assert floor >= 32 * 2000 * COST.per_token_s > 2 * alone
    assert floor <= max(latencies(heavy, [0.0] * 32, COST, CONFIG))


def test_the_command_prints_each_batch_floor_between_the_lone_query_and_the_schedule(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from accel.benchmarks import llm_schedule

    monkeypatch.setattr("sys.argv", ["llm_schedule", "--queries", "4", "--seeds", "1"])
    llm_schedule.main()
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if " batch " in line or " poisson " in line]
    assert len(rows) == sum(2 if shape.rate else 1 for shape in SHAPES.values())
    for row in rows:
        mode = "batch" if "batch" in row else "poisson"
        alone, floor, sent = row[row.index(mode) + 1:row.index(mode) + 4]
        name = " ".join(row[:row.index(mode)])
        assert (row[-1] == "-") == (not SHAPES[name].stages), row
        if mode == "poisson":
            assert floor == "n/a"
        else:
            assert float(alone) <= float(floor) <= float(sent)


def test_a_shapes_reference_is_its_median_seeds_makespan_or_p95_at_its_goals_rate() -> None:
    from accel.benchmarks.llm_schedule import makespan_as_sent, shape_as_sent

    batch = sorted(makespan_as_sent(workload("multi-agent", seed=seed), COST, CONFIG) for seed in range(3))[1]
    assert shape_as_sent("multi-agent", "batch", COST, CONFIG) == batch
    poisson = shape_as_sent("advanced RAG LangChain", "poisson", COST, CONFIG)
    assert poisson is not None and poisson < shape_as_sent("advanced RAG LangChain", "batch", COST, CONFIG)
    assert shape_as_sent("multi-agent", "poisson", COST, CONFIG) is None  # no goal rate for it
    assert shape_as_sent("a workload it never saw", "batch", COST, CONFIG) is None
