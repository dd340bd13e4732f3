"""Replica choice and failover (engines/replicas.py), on fake engines from accel.testing.fakes:
scheduling logic only; tests/engines/test_scaleout.py runs the real engines on Ray."""

from __future__ import annotations

import asyncio

import pytest

from accel.engines.base import GenerationRequest
from accel.engines.errors import EngineDied, EngineUnavailable, InvalidRequest
from accel.engines.replicas import ReplicatedEngine, ReplicatedLLM, prefix_key
from accel.testing.fakes import FakeEngine, FakeLLMEngine


class FakeDyingEngine(FakeEngine):
    """A fake batch engine that raises `error` while `down`."""

    def __init__(self, name: str, error: type[Exception] = EngineDied, **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.down = False
        self.error = error

    async def run(self, batch):
        if self.down:
            raise self.error(self.name, "down", "restart it")
        return await super().run(batch)


class FakeDyingLLM(FakeLLMEngine):
    """A fake LLM that dies after `die_after` chunks of a stream (or at once when 0)."""

    def __init__(self, name: str, die_after: int | None = None, **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.die_after = die_after

    async def stream(self, request):
        n = 0
        async for chunk in super().stream(request):
            if self.die_after is not None and n >= self.die_after:
                raise EngineDied(self.name, "killed", "restart it")
            n += 1
            yield chunk


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_batches_go_to_the_least_loaded_replica():
    a, b = FakeEngine("a", latency=0.05), FakeEngine("b", latency=0.05)
    engine = ReplicatedEngine([a, b])
    await asyncio.gather(*(engine.run([i]) for i in range(8)))
    assert len(a.batches) == len(b.batches) == 4


async def test_a_dead_replica_is_taken_out_its_batch_retried_and_it_rejoins_when_due():
    clock = Clock()
    a, b = FakeDyingEngine("a"), FakeDyingEngine("b")
    engine = ReplicatedEngine([a, b], retry_after_s=5.0, clock=clock)
    a.down = True
    assert await asyncio.gather(*(engine.run([i]) for i in range(4))) == [[0], [1], [2], [3]]  # none lost
    assert engine.set.retried >= 1 and engine.set.replicas[0].down_since is not None
    assert len(b.batches) == 4
    a.down = False
    assert await engine.run(["x"]) == ["x"] and not a.batches  # not due yet: b serves
    clock.now = 5.0
    await engine.run(["y"])
    assert a.batches == [["y"]] and engine.set.replicas[0].down_since is None  # back


async def test_every_replica_down_fails_at_once_typed():
    a, b = FakeDyingEngine("a"), FakeDyingEngine("b", error=EngineUnavailable)
    a.down = b.down = True
    engine = ReplicatedEngine([a, b], name="embed")
    with pytest.raises(EngineUnavailable, match="all 2 replicas") as caught:
        await engine.run(["x"])
    assert caught.value.engine == "embed" and caught.value.remedy


async def test_request_errors_are_not_failed_over():
    a = FakeEngine("a", compute=lambda r: (_ for _ in ()).throw(InvalidRequest("a", "bad", "fix it")))
    b = FakeEngine("b")
    engine = ReplicatedEngine([a, b])
    with pytest.raises(InvalidRequest):
        await engine.run(["x"])
    assert not b.batches and engine.set.replicas[0].down_since is None


async def test_llm_stream_fails_over_only_before_its_first_chunk():
    dead_at_once = ReplicatedLLM([FakeDyingLLM("a", die_after=0), FakeDyingLLM("b")], affinity_slack=-1)  # by load: a first
    chunks = [c async for c in dead_at_once.stream(GenerationRequest(prompt="one two three"))]
    assert chunks[-1].finished and dead_at_once.set.retried == 1
    dies_midway = ReplicatedLLM([FakeDyingLLM("a", die_after=1), FakeDyingLLM("b", die_after=1)], affinity_slack=-1)
    seen = []
    with pytest.raises(EngineDied):
        async for chunk in dies_midway.stream(GenerationRequest(prompt="one two three")):
            seen.append(chunk)
    assert len(seen) == 1 and dies_midway.set.retried == 0  # the caller had a token: no retry


async def test_llm_run_is_retried_and_prefix_affinity_keeps_a_prompt_on_one_replica():
    a, b = FakeLLMEngine("a"), FakeLLMEngine("b")
    engine = ReplicatedLLM([a, b])
    for _ in range(3):
        await engine.run([GenerationRequest(prompt="shared system prompt ... question")])
    assert sorted([len(a.requests), len(b.requests)]) == [0, 3]
    assert prefix_key(GenerationRequest(messages=[{"role": "user", "content": "hi"}])) == "hi"


def test_without_scale_out_configured_nothing_changes_and_ray_is_not_imported(tmp_path):
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from accel.adapters.common import bindings\n"
        "from accel.engines.embeddings import packaged_minilm_path\n"
        "e = bindings.embedder(str(packaged_minilm_path())).factory()\n"
        "l = bindings.openai_server('http://127.0.0.1:1/v1', 'tiny').factory()\n"
        "print(type(e).__name__, type(l).__name__, 'ray' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ACCEL_RAY_ADDRESS", "ACCEL_OPENAI_REPLICA_URLS")}
    env["ACCEL_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["SentenceTransformerEmbedder", "OpenAIServerEngine", "False"]
