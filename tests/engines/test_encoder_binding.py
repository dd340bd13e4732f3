"""Where `accel up --encoders server` binds the encoder servers' compute (engines/encoder_servers.py):
on the core vLLM-CPU's automatic binding leaves out of the LLM server's, so the servers do not
take turns on one core with their idle workers spinning beside each other (docs/twins.md)."""

from __future__ import annotations

import pytest

from accel.engines import encoder_servers
from accel.engines.encoder_servers import encoder_binding, encoder_cores, llm_cores


@pytest.fixture
def cores(monkeypatch: pytest.MonkeyPatch):
    def allow(*ids: int) -> None:
        monkeypatch.setattr(encoder_servers.os, "sched_getaffinity", lambda _pid: set(ids))
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    return allow


def test_encoders_compute_on_the_core_vllm_reserves_from_the_llm(cores) -> None:
    cores(0, 1)
    assert (llm_cores(), encoder_cores()) == ([0], [1])
    assert encoder_binding() == {"VLLM_CPU_OMP_THREADS_BIND": "1"}
    cores(2, 5, 3, 4)  # a container's allowed set, out of order
    assert (llm_cores(), encoder_cores()) == ([2, 3, 4], [5])
    assert encoder_binding() == {"VLLM_CPU_OMP_THREADS_BIND": "5"}


def test_one_core_is_left_to_vllm(cores) -> None:
    cores(3)
    assert (llm_cores(), encoder_cores(), encoder_binding()) == ([3], None, {})


def test_a_binding_the_user_chose_is_kept(cores, monkeypatch: pytest.MonkeyPatch) -> None:
    cores(0, 1)
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    assert encoder_binding() == {}
