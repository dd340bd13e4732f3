"""`accel up --twin`: the twins' process is recorded like a vLLM server, so a second `up` finds
it and `down` stops it (in a private home: never the shared stack)."""

from __future__ import annotations

import httpx
import pytest

from accel.config import Settings
from accel.engines import stack
from accel.engines.llm.server import group_members
from accel.engines.offline.llm import build_llm
from accel.engines.twin.stack import up_twin


@pytest.mark.slow
async def test_up_twin_records_a_stack_that_down_stops(tmp_path) -> None:
    cfg = Settings(home=tmp_path, pg_dsn="postgresql://nobody@127.0.0.1:1/unused", llm_model=str(build_llm("tiny")))
    info = await up_twin("h100-8b", cfg)
    try:
        assert stack.read_state(cfg) == info
        assert info.embed_base_url and info.rerank_base_url and info.model == "tiny"
        async with httpx.AsyncClient() as client:
            for url in (info.openai_base_url, info.embed_base_url):
                assert (await client.get(url + "/models")).status_code == 200
            assert (await client.get(info.rerank_base_url + "/health")).status_code == 200
            # scheduled by priority, as `accel up`'s vLLM: a default twin answers 400 to this
            ranked = await client.post(info.openai_base_url + "/completions", json={
                "model": info.model, "prompt": "a ranked request", "max_tokens": 2, "priority": 3})
            assert ranked.status_code == 200, ranked.text
        again = await up_twin("h100-8b", cfg)
        assert again.server_pid == info.server_pid
        with pytest.raises(Exception, match="already runs"):
            await up_twin("another-profile", cfg)
    finally:
        stopped = stack.down(cfg)
    assert "vllm-server" in stopped and not group_members(info.server_pid)
    assert stack.read_state(cfg) is None


@pytest.mark.slow
async def test_a_plain_up_never_takes_the_twins_for_the_real_engines(tmp_path) -> None:
    """`accel up` over a home whose stack is twins refuses (with the remedy) instead of reporting
    the simulated engines as the real ones, or relaunching vLLM on a twin's port."""
    from accel.engines.errors import EngineError

    cfg = Settings(home=tmp_path, pg_dsn="postgresql://nobody@127.0.0.1:1/unused", llm_model=str(build_llm("tiny")))
    info = await up_twin("h100-8b", cfg)
    try:
        with pytest.raises(EngineError, match="engine twins") as refused:
            await stack.up(cfg)
        assert "accel down" in str(refused.value) and "--twin" in str(refused.value)
        assert stack.read_state(cfg) == info
    finally:
        stack.down(cfg)
