"""A profile records how busy the machine was: other processes' CPU around each sweep, saved with
the profile, logged, shown where the limits are reported, and refused by `--require-quiet`."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from accel import profiles
from accel.engines import machine_load
from accel.engines.machine_load import MachineLoad, measure, read_cpu_seconds
from accel.engines.profile import EngineProfile, ProfilePoint, profile_engine


class _VirtualMachine:
    """Fake CPU counters on a virtual clock: waiting advances the clock and the counters by the
    CPU that this process and the others are said to use."""

    def __init__(self, others_cores: float, own_cores: float) -> None:
        self.others, self.own_rate = others_cores, own_cores
        self.now = self.busy = self.own_cpu = 0.0

    async def wait(self, seconds: float) -> None:
        self.now += seconds
        self.own_cpu += self.own_rate * seconds
        self.busy += (self.others + self.own_rate) * seconds

    async def probe(self) -> MachineLoad | None:
        return await measure(1.0, read=lambda: self.busy, own=lambda: self.own_cpu, wait=self.wait,
                             clock=lambda: self.now)


async def test_this_process_s_own_cpu_is_not_counted_as_the_machine_s_load() -> None:
    machine = _VirtualMachine(others_cores=1.2, own_cores=0.7)
    load = await machine.probe()
    assert load is not None and load.window_s == pytest.approx(1.0)
    assert load.busy_cores == pytest.approx(1.2) and not load.quiet
    assert "1.2 of" in load.describe()
    idle = await _VirtualMachine(others_cores=0.1, own_cores=0.9).probe()
    assert idle is not None and idle.busy_cores == pytest.approx(0.1) and idle.quiet


async def test_no_cpu_counters_means_not_measured(tmp_path: Path) -> None:
    assert read_cpu_seconds(tmp_path / "absent") is None
    assert await measure(1.0, read=lambda: None) is None


def test_the_kernel_s_counters_are_read_as_busy_seconds(tmp_path: Path) -> None:
    import os

    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal (guest columns are inside user already)
    stat.write_text("cpu  300 0 100 5000 50 0 20 0 7 0\ncpu0 150 0 50 2500 25 0 10 0 0 0\n")
    assert read_cpu_seconds(stat) == pytest.approx(420 / os.sysconf("SC_CLK_TCK"))


@pytest.mark.skipif(not machine_load.PROC_STAT.exists(), reason="no /proc/stat on this OS: load is not measured")
async def test_a_process_spinning_beside_it_reads_as_load() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        load = await measure(0.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert load is not None
    assert load.busy_cores >= 0.5 and not load.quiet  # one spinning process is most of a core


class _InstantEngine:
    """A fake engine (named so) whose calls return at once; only the load around its sweep matters."""

    name = "fake-instant"

    async def start(self) -> None:
        pass

    async def run(self, batch):
        return list(batch)


async def test_a_sweep_on_a_busy_machine_is_saved_as_busy_and_reported(tmp_path: Path, caplog) -> None:
    busy = _VirtualMachine(others_cores=1.6, own_cores=0.0)
    with caplog.at_level(logging.WARNING, logger="accel.engines.profile"):
        profile = await profile_engine(_InstantEngine(), lambda n: list(range(n)), (1, 2), label="query",
                                       repeats=1, warmup=0, load_probe=busy.probe)
    assert profile.busy and profile.busy_cores == pytest.approx(1.6) and profile.measured_at
    assert any("1.6 of" in r.getMessage() and "quiet machine" in r.getMessage() for r in caplog.records)

    quiet = await profile_engine(_InstantEngine(), lambda n: list(range(n)), (1, 2), label="chunk",
                                 repeats=1, warmup=0, load_probe=_VirtualMachine(0.2, 0.0).probe)
    assert not quiet.busy and quiet.busy_cores == pytest.approx(0.2)

    for p in (profile, quiet):
        p.save(tmp_path / f"{p.engine}-{p.label}.json")
    again = EngineProfile.load(tmp_path / "fake-instant-query.json")
    assert (again.busy_cores, again.measured_at) == (profile.busy_cores, profile.measured_at)

    with caplog.at_level(logging.WARNING, logger="accel.profiles"):
        limits = profiles.load(tmp_path)
    assert limits.busy == ("fake-instant/query (1.6 cores busy)",)
    assert "fake-instant/query (1.6 cores busy)" in limits.source and "quiet machine" in limits.source
    assert f"profiled {profile.measured_at}" in limits.source
    assert any("busy machine" in r.getMessage() for r in caplog.records if r.name == "accel.profiles")


def test_profiles_saved_before_the_load_was_recorded_still_load(tmp_path: Path) -> None:
    old = tmp_path / "emb-query.json"
    old.write_text('{"engine": "emb", "label": "query", "max_efficient_batch": 2, '
                   '"points": [{"batch_size": 1, "throughput": 10.0, "latency_s": 0.1}, '
                   '{"batch_size": 2, "throughput": 19.0, "latency_s": 0.105}]}')
    profile = EngineProfile.load(old)
    assert profile.busy_cores is None and profile.measured_at is None and not profile.busy
    limits = profiles.load(tmp_path)
    assert limits.busy == () and limits.by_engine == {"emb": {"query": 2}}
    assert EngineProfile("e", "query", [ProfilePoint(1, 1.0, 1.0)], 1).busy is False


@pytest.mark.parametrize("require_quiet", [False, True])
def test_accel_profile_warns_of_a_busy_machine_and_require_quiet_saves_nothing(
        tmp_path: Path, monkeypatch, require_quiet: bool) -> None:
    from typer.testing import CliRunner

    from accel.cli import app
    from accel.engines import profile_sweeps

    busy = EngineProfile("pgvector", "search-k8-5000rows", [ProfilePoint(1, 100.0, 0.01), ProfilePoint(2, 150.0, 0.013)],
                         2, "2026-11-27T21:05:00+00:00", 1.7)

    async def swept(**_kwargs) -> EngineProfile:  # a fake sweep (named so): the CLI's decisions only
        return busy

    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    monkeypatch.setattr(profile_sweeps, "profile_vectordb", swept)
    args = ["profile", "--engine", "vectordb", "--json"] + (["--require-quiet"] if require_quiet else [])
    result = CliRunner().invoke(app, args)
    assert "used 1.7 cores" in result.output and "Run `accel profile` again" in result.output
    saved = list((tmp_path / "profiles").glob("*.json")) if (tmp_path / "profiles").is_dir() else []
    if require_quiet:
        assert result.exit_code == 1 and saved == []
    else:
        assert result.exit_code == 0 and [p.name for p in saved] == ["pgvector-search-k8-5000rows.json"]
        assert EngineProfile.load(saved[0]).busy
