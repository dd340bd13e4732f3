"""`accel profile` measures what a lone prompt costs the LLM by its length (`PrefillCost`), so
warm-ups are sent only where they pay (`accel.profiles.MeasuredLimits.warm_min_tokens`)."""

from __future__ import annotations

import json
from pathlib import Path

from accel.engines.base import Generation, GenerationRequest
from accel.engines.profile import EngineProfile, PrefillCost, ProfilePoint
from accel.engines.profile_sweeps import PREFILL_LENGTHS, measure_prefill


class RecordingLLM:
    """A fake LLM engine (named so): tokenizes by words, answers at once, records requests."""

    name = "fake-llm"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    async def tokenize(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return ([1] if add_special_tokens else []) + [hash(word) % 50_000 for word in text.split()]

    async def run(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.requests += requests
        return [Generation("x", len(r.prompt_token_ids or ()), 1, finish_reason="length") for r in requests]


async def test_prefill_is_probed_with_lone_new_prompts_of_exactly_each_length() -> None:
    llm = RecordingLLM()
    cost = await measure_prefill(llm, repeats=2)
    assert (cost.short_tokens, cost.long_tokens) == PREFILL_LENGTHS
    lengths = [len(r.prompt_token_ids) for r in llm.requests]
    assert lengths == [PREFILL_LENGTHS[0]] * 3 + [PREFILL_LENGTHS[1]] * 3  # one untimed, then the repeats
    assert all(r.params.max_tokens == 1 for r in llm.requests)
    heads = {tuple(r.prompt_token_ids[:4]) for r in llm.requests}
    assert len(heads) == len(llm.requests)  # each opens with its own counter: no block is cached
    assert cost.short_s > 0 and cost.long_s > 0


def test_accel_profile_reports_the_llm_s_prefill_cost(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from accel.cli import app
    from accel.engines import profile_sweeps

    cost = PrefillCost(32, 0.013371, 1024, 0.035411)
    swept = EngineProfile("vllm-openai", "prompt350-out32", [ProfilePoint(1, 30.0, 1.0), ProfilePoint(2, 60.0, 1.0)], 2,
                          "2026-11-28T01:00:00+00:00", 0.0, cost)

    async def profile_llm(*_args, **_kwargs):  # a fake sweep (named so): the CLI's report only
        return swept, {"n": 16, "sequential_s": 2.0, "batched_s": 1.0, "ratio": 2.0}

    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    monkeypatch.setattr(profile_sweeps, "profile_llm", profile_llm)
    text = CliRunner().invoke(app, ["profile", "--engine", "llm"])
    assert text.exit_code == 0, text.output
    said = " ".join(text.output.split())  # rich wraps at the terminal's width
    assert "12.7 ms a request + 22.2 us a token" in said and "fewer than 570 tokens" in said
    result = CliRunner().invoke(app, ["profile", "--engine", "llm", "--json"])
    prefill = json.loads(result.stdout)["profiles"][0]["prefill"]
    assert prefill["warm_min_tokens"] == 570 and prefill["short_tokens"] == 32
    assert EngineProfile.load(next((tmp_path / "profiles").glob("*.json"))).prefill == cost


async def test_a_model_with_a_short_window_is_probed_at_its_longest_prompt() -> None:
    llm = RecordingLLM()
    llm.max_model_len = 512
    cost = await measure_prefill(llm, repeats=1)
    assert cost.long_tokens == 511 and max(len(r.prompt_token_ids) for r in llm.requests) == 511
