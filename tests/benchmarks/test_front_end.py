"""The front-end meter: CPU time per query, this process's and accel's loop thread's."""

from __future__ import annotations

import threading
import time

import pytest

from accel.benchmarks import front_end
from accel.benchmarks.summary import front_end_line, twin_busy_line, twin_cpu_line


def _spin_until(cpu_s: float) -> None:
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


def test_the_loop_threads_cpu_is_counted_apart_and_inside_the_process() -> None:
    started, go, done, release = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    def loop() -> None:  # stands in for accel's session loop thread: alive at both samples
        started.set()
        go.wait()
        _spin_until(0.05)
        done.set()
        release.wait()

    thread = threading.Thread(target=loop, name=front_end.LOOP_THREAD)
    thread.start()
    started.wait()
    assert front_end._loop_thread() is not None  # what the harness finds by name
    before = front_end.sample(thread)  # by name, another test's accel session could be found first
    go.set()
    done.wait()
    after = front_end.sample(thread)
    release.set()
    thread.join()
    spent = front_end.per_query(before, after, 10, in_process_encoders=False)
    assert spent is not None
    assert spent["loop_cpu_ms_per_query"] >= 5.0  # 50 ms of CPU over 10 queries
    assert spent["process_cpu_ms_per_query"] >= spent["loop_cpu_ms_per_query"] - 0.5
    # from the unrounded CPU time: the rounded one can land the rate on the next tenth
    cpu_ms = spent["process_cpu_ms_per_query"]  # both figures are rounded: 0.1 q/s, and 0.001 ms scaled by 1000 / ms^2
    assert spent["saturates_at_qps"] == pytest.approx(1000 / cpu_ms, abs=0.05 + 0.5 / cpu_ms ** 2 + 1e-9)


def test_a_stock_systems_sample_has_no_loop_even_beside_an_idle_session() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name=front_end.LOOP_THREAD)  # a session left idle
    thread.start()
    try:
        assert front_end._loop_thread() is not None
        before, after = front_end.sample(loop=False), front_end.sample(loop=False)
        assert before.loop_s is None and before.loop_ident is None
        assert front_end.per_query(before, after, 4, in_process_encoders=False)["loop_cpu_ms_per_query"] is None
    finally:
        release.set()
        thread.join()


def test_without_a_loop_thread_or_samples() -> None:
    before = front_end.CpuSample(1.0, None, None)
    after = front_end.CpuSample(1.5, None, None)
    spent = front_end.per_query(before, after, 100, in_process_encoders=True)
    assert spent == {"process_cpu_ms_per_query": 5.0, "loop_cpu_ms_per_query": None,
                     "saturates_at_qps": 200.0, "includes_in_process_encoders": True, "app_loop_busy_s": None}
    assert front_end.per_query(None, after, 100, in_process_encoders=True) is None
    assert front_end.per_query(before, after, 0, in_process_encoders=True) is None
    # a loop thread that changed between the samples (a new session) is not compared
    other = front_end.per_query(front_end.CpuSample(1.0, 0.2, 1), front_end.CpuSample(1.5, 0.3, 2), 100,
                                in_process_encoders=False)
    assert other is not None and other["loop_cpu_ms_per_query"] is None


def test_the_report_line_names_each_system() -> None:
    report = {"systems": {
        "stock-sequential": {"front_end": {"process_cpu_ms_per_query": 4.0, "loop_cpu_ms_per_query": None,
                                           "saturates_at_qps": 250.0, "includes_in_process_encoders": False}},
        "accel-topology": {"front_end": {"process_cpu_ms_per_query": 5.0, "loop_cpu_ms_per_query": 2.0,
                                         "saturates_at_qps": 200.0, "includes_in_process_encoders": False,
                                         "app_loop_busy_s": 1.234}},
        "llamadistpc": {"front_end": None},
    }}
    line = front_end_line(report)
    assert line is not None
    assert "4.0, 250 q/s" in line and "5.0 (loop 2.0), 200 q/s, app loop busy 1.23 s" in line and "in-process" not in line
    assert front_end_line({"systems": {"x": {}}}) is None


def test_the_twins_cpu_line_gives_each_systems_share_per_query() -> None:
    report = {"config": {"queries": 32}, "systems": {
        "stock-concurrent": {"twin_cpu_s": 0.352}, "accel-topology": {"twin_cpu_s": 0.32}, "llamadistpc": {"twin_cpu_s": None}}}
    line = twin_cpu_line(report)
    assert line is not None and "11.0" in line and "10.0" in line and line.count(";") == 1
    assert twin_cpu_line({"config": {"queries": 32}, "systems": {"x": {"twin_cpu_s": None}}}) is None


def test_the_llamaindex_driver_counts_the_time_its_loop_runs_the_apps_code() -> None:
    """Four queries each hold the driver's loop 50 ms (a busy wait, as prompt packing does):
    the loop ran code >= 200 ms of the batch's wall time."""
    from accel.benchmarks.drivers import LlamaIndexDriver

    class Answer:
        response = "ok"

    class App:
        async def aquery(self, question: str) -> Answer:
            end = time.perf_counter() + 0.05
            while time.perf_counter() < end:
                pass
            return Answer()

    driver = LlamaIndexDriver()
    try:
        began = time.perf_counter()
        assert driver.batch(App(), ["a", "b", "c", "d"], 4) == ["ok"] * 4
        wall = time.perf_counter() - began
        assert driver.loop_busy_s is not None and 0.2 <= driver.loop_busy_s <= wall
        assert "select" not in vars(driver._loop._selector)  # the meter is gone after the batch
    finally:
        driver.close()


def test_time_in_the_loops_selector_is_counted_as_waiting_on_a_virtual_clock() -> None:
    """The selector waits 0.3 s twice while the loop's code runs 0.05 s between: the meter
    reads 0.6 s waited and nothing of the code, and removes itself after the block."""
    from types import SimpleNamespace

    from accel.benchmarks.drivers import _waiting

    now = [0.0]

    class Selector:
        def select(self, timeout: float | None = None) -> list[object]:
            now[0] += timeout or 0.0
            return []

    loop = SimpleNamespace(_selector=Selector())
    with _waiting(loop, clock=lambda: now[0]) as waited:  # type: ignore[arg-type]
        loop._selector.select(0.3)
        now[0] += 0.05  # the loop's own code
        loop._selector.select(0.3)
        assert waited() == pytest.approx(0.6) and now[0] == pytest.approx(0.65)
    assert "select" not in vars(loop._selector)
    with _waiting(SimpleNamespace()) as none:  # type: ignore[arg-type] - not a selector loop
        assert none() == 0.0


def test_the_twins_busy_line_gives_each_engines_share_of_each_systems_run() -> None:
    report = {"config": {"queries": 32}, "systems": {
        "stock-concurrent": {"makespan_s": 2.0, "twin_busy_s": {"llm": 1.5, "embed": 0.2, "rerank": 0.1, "llm_steps": 130.0}},
        "accel-topology": {"makespan_s": 1.6, "twin_busy_s": {"llm": 1.44, "embed": 0.04, "rerank": 0.08, "llm_steps": 120.0}},
        "llamadistpc": {"makespan_s": 1.9, "twin_busy_s": None}}}
    line = twin_busy_line(report)
    assert line is not None
    assert "LLM stock-conc 1.50 (75%, 130 steps), accel 1.44 (90%, 120 steps)" in line
    assert "embed stock-conc 0.20 (10%), accel 0.04 (2%)" in line and "rerank stock-conc 0.10 (5%)" in line
    assert "llamadistpc" not in line
    assert twin_busy_line({"config": {"queries": 32}, "systems": {"x": {"makespan_s": 1.0, "twin_busy_s": None}}}) is None
