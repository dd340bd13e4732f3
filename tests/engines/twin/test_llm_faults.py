"""Each scripted fault happens where the script says, counted in tokens, requests and
simulated seconds."""

from __future__ import annotations

import httpx
import pytest

LONG = {"prompt": "count to a hundred", "max_tokens": 100, "ignore_eos": True}


async def _install(client: httpx.AsyncClient, **script) -> None:
    response = await client.post("/admin/faults", json=script)
    assert response.status_code == 200, response.text


async def test_die_after_n_tokens_resets_streams_and_refuses(make_twin) -> None:
    twin = await make_twin()
    base = twin.listener.base_url
    async with httpx.AsyncClient(base_url=base) as client:
        await client.post("/v1/completions", json={"prompt": "warm", "max_tokens": 3})  # tokens before count not
        await _install(client, die_after_tokens=5)
        received = []
        with pytest.raises(httpx.TransportError):
            async with client.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: {"):
                        received.append(line)
    assert len(received) <= 5
    assert twin.engine.scheduler.counters.generation_tokens == 3 + 5
    async with httpx.AsyncClient() as fresh:
        with pytest.raises(httpx.ConnectError):
            await fresh.get(base + "/health")


async def test_stall_delays_the_next_step_by_s_simulated_seconds(make_twin, clock) -> None:
    twin = await make_twin()
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        await _install(client, stall_s=12.5)
        response = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 2})
    assert response.status_code == 200
    assert 12.5 in clock.waits
    assert twin.engine.simulated_s >= 12.5


async def test_5xx_on_the_kth_request(make_twin) -> None:
    twin = await make_twin()
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        await _install(client, error_on_request=2, error_status=502)
        codes = [(await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 1})).status_code
                 for _ in range(3)]
    assert codes == [200, 502, 200]


async def test_slow_factor_multiplies_every_step(make_twin) -> None:
    twin = await make_twin()
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        before = twin.engine.simulated_s
        await client.post("/v1/completions", json={"prompt": "first prompt", "max_tokens": 8, "ignore_eos": True})
        normal = twin.engine.simulated_s - before
        await _install(client, slow_factor=3.0)
        before = twin.engine.simulated_s
        await client.post("/v1/completions", json={"prompt": "other prompt", "max_tokens": 8, "ignore_eos": True})
        slow = twin.engine.simulated_s - before
        await client.delete("/admin/faults")
        assert (await client.get("/admin/faults")).json()["slow_factor"] == 1.0
    assert slow == pytest.approx(3.0 * normal, rel=1e-6)


async def test_refuse_connections_for_s_simulated_seconds(make_twin, clock) -> None:
    twin = await make_twin()
    base = twin.listener.base_url
    clock.hold(40.0)  # the refusal lasts until the test lets its 40 simulated seconds pass
    async with httpx.AsyncClient(base_url=base) as client:
        await _install(client, refuse_s=40.0)
    async with httpx.AsyncClient(base_url=base) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("/health")
        reopened = twin._refusal
        clock.release(40.0)
        await reopened
        assert (await client.get("/health")).status_code == 200


async def test_refuse_until_told_and_a_bad_script(make_twin) -> None:
    twin = await make_twin()
    base = twin.listener.base_url
    async with httpx.AsyncClient(base_url=base) as client:
        bad = await client.post("/admin/faults", json={"explode": True})
        assert bad.status_code == 400
        await _install(client, refuse=True)
    async with httpx.AsyncClient(base_url=base) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("/health")
        await twin.listener.accept()
        assert (await client.get("/health")).status_code == 200
