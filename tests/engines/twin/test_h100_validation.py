"""The h100-8b twin's per-call times lie within 10% of the H100 measurements it was fitted to
(issue 25's second validation check), computed on the scheduler's own simulated clock."""

from __future__ import annotations

import pytest

from accel.engines.twin.content import OutputPlan
from accel.engines.twin.profile import load_profile
from accel.engines.twin.scheduler import Scheduler, Seq

PROFILE = load_profile("h100-8b")
TOLERANCE = 0.10


def _seqs(batch: int, length: int) -> list[Seq]:
    """`batch` prompts of `length` tokens that share no block (no prefix-cache hits)."""
    plan = {"ignore_eos": True}
    return [Seq(f"r{i}", [100_000 * (i + 1) + t for t in range(length)], 4096, OutputPlan([i], plan, [7], None))
            for i in range(batch)]


def _run_until(scheduler: Scheduler, done) -> tuple[float, list[float]]:
    clock, steps = 0.0, []
    while not done():
        step = scheduler.plan()
        assert step is not None
        took = PROFILE.llm.step_s(step.prefill_tokens, len(step.prefill), len(step.decode), step.context_tokens)
        clock += took
        steps.append(took)
        scheduler.finish(step)
    return clock, steps


def _measured(kind: str, **where: int) -> dict:
    [row] = [r for r in PROFILE.measurements[kind] if all(r[k] == v for k, v in where.items())]
    return row


DECODE = [(r["batch"], r["kv"]) for r in PROFILE.measurements["llm_decode"] if r["batch"] in (1, 16, 128)]
PREFILL = [(r["batch"], r["len"]) for r in PROFILE.measurements["llm_prefill"]]


def test_the_check_covers_batches_1_16_and_128() -> None:
    assert {batch for batch, _ in DECODE} == {1, 16, 128} and {1, 16} <= {batch for batch, _ in PREFILL}


@pytest.mark.parametrize(("batch", "kv"), DECODE)
def test_decode_step_matches_h100(batch: int, kv: int) -> None:
    scheduler = Scheduler(PROFILE.llm_config)
    seqs = _seqs(batch, kv - 1)
    for seq in seqs:
        scheduler.add(seq)
    _run_until(scheduler, lambda: all(seq.output for seq in seqs))
    step = scheduler.plan()
    assert step is not None and not step.prefill and len(step.decode) == batch
    # chunked prefill: the first-admitted requests decoded while later ones prefilled
    assert all(kv <= len(seq.prompt) + len(seq.output) <= kv + 20 for seq in seqs)
    took = PROFILE.llm.step_s(0, 0, batch, step.context_tokens)
    measured = _measured("llm_decode", batch=batch, kv=kv)["ms"] / 1e3
    assert took == pytest.approx(measured, rel=TOLERANCE)


@pytest.mark.parametrize(("batch", "length"), PREFILL)
def test_prefill_matches_h100(batch: int, length: int) -> None:
    """Batch-1 prefills compare with the GPU time (vLLM runs them from CUDA graphs; the HF eager
    call's 12-14 ms of Python launch overhead is no part of vLLM's step); batches are
    compute-bound, where the two agree."""
    scheduler = Scheduler(PROFILE.llm_config)
    seqs = _seqs(batch, length)
    for seq in seqs:
        scheduler.add(seq)
    took, _ = _run_until(scheduler, lambda: all(seq.output for seq in seqs))
    measured = _measured("llm_prefill", batch=batch, len=length)["kernel_ms" if batch == 1 else "ms"] / 1e3
    assert took == pytest.approx(measured, rel=TOLERANCE)


ENCODERS = PROFILE.measurements["encoders"]
CLASSES = [(kind, cls.tokens) for kind, cost in (("embed", PROFILE.embed), ("rerank", PROFILE.rerank)) for cls in cost.classes]


def _cost(kind: str):
    return PROFILE.embed if kind == "embed" else PROFILE.rerank


def test_every_measured_length_is_a_class() -> None:
    measured = {(r["kind"], r["tokens"]) for r in ENCODERS["grid"]}
    assert set(CLASSES) == measured


@pytest.mark.parametrize(("kind", "tokens"), CLASSES)
@pytest.mark.parametrize("batch", [1, 16, 128])
def test_encoder_calls_match_h100(kind: str, tokens: int, batch: int) -> None:
    """At a measured batch size the curve is the measurement; where a class was not measured at
    128 (the embedder's), the twin lies between its measured neighbours (64 and 256)."""
    measured = {r["items"]: r["st"]["ms"] / 1e3 for r in ENCODERS["grid"] if r["kind"] == kind and r["tokens"] == tokens}
    took = _cost(kind).call_s(batch, tokens)
    if batch in measured:
        assert took == pytest.approx(measured[batch], rel=TOLERANCE)
    else:
        assert measured[64] < took < measured[256]


@pytest.mark.parametrize("kind", ["embed", "rerank"])
def test_the_calls_a_benchmark_sent_match_h100(kind: str) -> None:
    """Held out of the fit: the call shapes advanced RAG sent on the twin (batch 32, both
    frameworks), each timed on the H100 with its inputs at the logged length. Weighted by how
    many calls each shape stands for, the twin's time is within 10% of the measured one."""
    rows = [r for r in ENCODERS["calls"] if r["kind"] == kind]
    errors = [abs(_cost(kind).cost_of([r["tokens"]] * r["items"]) / (r["st"]["ms"] / 1e3) - 1) for r in rows]
    weights = [r["calls_in_bucket"] for r in rows]
    assert len(rows) >= 10
    assert sum(e * w for e, w in zip(errors, weights, strict=True)) / sum(weights) <= TOLERANCE


def test_a_wrong_profile_fails_the_check() -> None:
    """The check can fail: a twin twice as slow per sequence and KV token misses batch 128."""
    from dataclasses import replace

    slow = replace(PROFILE.llm, per_seq_s=PROFILE.llm.per_seq_s * 2, per_context_token_s=PROFILE.llm.per_context_token_s * 2)
    assert PROFILE.llm.step_s(0, 0, 128, 128 * 1024) == pytest.approx(
        _measured("llm_decode", batch=128, kv=1024)["ms"] / 1e3, rel=TOLERANCE)
    measured = _measured("llm_decode", batch=128, kv=1024)["ms"] / 1e3
    assert slow.step_s(0, 0, 128, 128 * 1024) > measured * (1 + TOLERANCE)


def test_the_shipped_encoders_are_the_fit_of_the_committed_measurement() -> None:
    """The profile's encoder curves are what `engines/twin/fit.py` makes of the GPU run kept in
    docs/ (not edited by hand, not fitted to another run)."""
    import json
    from importlib import resources
    from pathlib import Path

    from accel.engines.twin.fit import h100_encoders

    source = Path(__file__).parents[3] / "docs/benchmarks/twin-validation/h100-encoders-2026-12-05.json"
    shipped = json.loads(resources.files("accel.engines.twin").joinpath("profiles", "h100-8b.json").read_text())
    fitted = h100_encoders(json.loads(source.read_text()))
    assert fitted["engines"] == shipped["engines"]
    assert (fitted["embed"], fitted["rerank"]) == (shipped["twin"]["embed"], shipped["twin"]["rerank"])
    assert fitted["measurements"] == shipped["measurements"]["encoders"]
