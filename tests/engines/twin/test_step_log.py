"""The LLM twin logs every step it models, so a bench can say where a run's LLM time went: how
much paid for reading the weights under-filled, and how long prefill held decoding sequences."""

from __future__ import annotations

import httpx
import pytest

from accel.engines.twin.content import OutputPlan
from accel.engines.twin.engine import Token, TwinEngine
from accel.engines.twin.profile import load_profile
from accel.engines.twin.scheduler import Seq

PROFILE = load_profile("h100-8b")


def _seq(rid: str, prompt_tokens: int, tokens: int, first: int = 1) -> Seq:
    return Seq(rid, list(range(first, first + prompt_tokens)), tokens, OutputPlan([1], {"ignore_eos": True}, [5], None))


async def test_a_prompt_arriving_mid_decode_is_logged_as_the_decoders_stall(clock) -> None:
    engine = TwinEngine(PROFILE.llm, PROFILE.llm_config, sleep=clock.sleep, clock=clock.now)
    decoding = engine.submit(_seq("a", 40, 6))
    assert isinstance(await decoding.get(), Token)  # its prompt is in; it decodes from here
    long = engine.submit(_seq("b", 3000, 2, first=1000))  # no prefix shared with "a"
    for queue, left in ((decoding, 5), (long, 2)):
        for _ in range(left):
            await queue.get()
    await engine.close()

    log = list(engine.step_log)
    assert len(log) == engine.steps
    assert sum(r.seconds for r in log) == engine.simulated_s
    assert [later.at for later in log[1:]] == pytest.approx([e.at + e.seconds for e in log[:-1]]), "back to back"
    mixed = [r for r in log if r.prefill_seqs and r.decode_seqs]
    assert len(mixed) == 1 and mixed[0].prefill_tokens == 3000 and mixed[0].decode_seqs == 1
    alone = PROFILE.llm.step_s(0, 0, 1, mixed[0].context_tokens)
    assert mixed[0].stall_s == pytest.approx(mixed[0].seconds - alone) and mixed[0].stall_s > 0.05, "3,000 prompt tokens held the decoder"
    decodes = [r for r in log if not r.prefill_seqs]
    assert decodes and all(r.stall_s == 0 and r.work_s < PROFILE.llm.floor_s <= r.seconds for r in decodes)
    assert mixed[0].work_s > PROFILE.llm.floor_s, "a 3,000-token step pays for its tokens, not the floor"


async def test_the_route_serves_the_steps_of_a_window(make_twin) -> None:
    twin = await make_twin()
    body = {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 4, "ignore_eos": True}
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        await client.post("/v1/completions", json=body)
        between = twin.engine.clock()
        await client.post("/v1/completions", json=body)
        everything = (await client.get("/admin/steps")).json()
        later = (await client.get("/admin/steps", params={"since": between})).json()
        earlier = (await client.get("/admin/steps", params={"until": between})).json()
        bad = await client.get("/admin/steps", params={"since": "soon"})
    assert everything["clock"] == "monotonic" and everything["floor_s"] == PROFILE.llm.floor_s
    fields = everything["fields"]
    assert fields[:2] == ["at", "seconds"] and "stall_s" in fields and "work_s" in fields
    assert len(everything["steps"]) == twin.engine.steps == 8  # each answer: its prefill's token, then 3 decodes
    assert len(later["steps"]) == len(earlier["steps"]) == 4
    assert sorted(map(tuple, earlier["steps"] + later["steps"])) == sorted(map(tuple, everything["steps"]))
    assert bad.status_code == 400 and "monotonic" in bad.json()["error"]["message"]
