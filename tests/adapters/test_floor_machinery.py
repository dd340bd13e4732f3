"""The floor's own machinery, on a plug-in for a throwaway class and fake engines (FakeEngine,
FakeLLMEngine: scheduler unit tests only): inert outside runs, stock for unmapped calls and
failing plans, fallback on engine errors, batching across programs, reversible patching;
program priorities as the session gives them; LangGraph structure depths."""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import types
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from accel.adapters.common.bindings import EngineSpec
from accel.adapters.common.floor import Plugin, arouted, register, route, routed
from accel.adapters.common.floor import install, is_patched, uninstall
from accel.config import Settings
from accel.engines.base import GenerationRequest
from accel.engines.errors import ModelNotFound
from accel.runtime.programs import QUANTUM_S, Priorities, plas_level
from accel.testing.fakes import FakeEngine, FakeLLMEngine
from accel.scope import WrappedRun, stock_call, wrapped_run
from accel.session import Session
from accel.types import EngineCall, EngineLimits, OnSessionLoop


class Doubler:
    """A stand-in framework component: `double(xs)` returns each x doubled, its own way."""

    calls = 0

    def double(self, xs):
        Doubler.calls += 1
        return [2 * x for x in xs]

    async def adouble(self, xs):
        Doubler.calls += 1
        return [2 * x for x in xs]


@pytest.fixture
def session():
    session = Session()
    yield session
    session.shutdown()


@pytest.fixture
def plugin(session):
    module = types.ModuleType(f"fake_framework_{uuid.uuid4().hex[:6]}")
    module.Doubler = type("Doubler", (Doubler,), {})
    sys.modules[module.__name__] = module
    engine = FakeEngine("fake-doubler", latency=0.02, compute=lambda x: 2 * x)
    spec = EngineSpec("embed", f"fake-{module.__name__}", lambda: engine)
    failing = EngineSpec("embed", f"missing-{module.__name__}", lambda: (_ for _ in ()).throw(ModelNotFound("fake", "no model", "none")))

    def plan(component, xs):
        if not xs:
            return "nothing to do"
        if any(x < 0 for x in xs):
            raise ValueError("negative")
        return EngineCall(failing if 999 in xs else spec, list(xs), "Doubler")

    name = f"test:{module.__name__}"
    register(Plugin(name, module.__name__, "Doubler", {"double": routed("Doubler", plan), "adouble": arouted("Doubler", plan)}))
    install()
    route.stats.reset()
    yield module, engine, name
    uninstall()
    install()
    del sys.modules[module.__name__]


def run_in(session):
    return WrappedRun(app="test", session=session)


def test_inert_outside_runs_and_in_stock_calls(plugin) -> None:
    module, engine, name = plugin
    assert is_patched(name)
    doubler = module.Doubler()
    assert doubler.double([1, 2]) == [2, 4]
    with wrapped_run(WrappedRun(app="t")), stock_call():
        assert doubler.double([1, 2]) == [2, 4]
    assert engine.batches == [] and route.stats.snapshot()["routed"] == {}


def test_routed_inside_a_run_with_stock_results(plugin, session) -> None:
    module, engine, _ = plugin
    doubler = module.Doubler()
    with wrapped_run(run_in(session)):
        assert doubler.double([1, 2, 3]) == [2, 4, 6]
        assert asyncio.run(doubler.adouble([4])) == [8]
    assert engine.batches == [[1, 2, 3], [4]]
    assert route.stats.snapshot()["routed"] == {"Doubler": 2}


def test_unmapped_calls_failing_plans_and_engine_errors_run_the_original(plugin, session) -> None:
    module, engine, _ = plugin
    doubler = module.Doubler()
    Doubler.calls = 0
    with wrapped_run(run_in(session)):
        assert doubler.double([]) == []          # the plan's reason: stock
        assert doubler.double([-1]) == [-2]      # the plan raised: stock (stock raises its own errors)
        assert doubler.double([999]) == [1998]   # the engine could not be made: fallback
    assert Doubler.calls == 3 and engine.batches == []
    counts = route.stats.snapshot()
    assert ("Doubler", "nothing to do") in counts["stock"]
    assert ("Doubler", "ModelNotFound") in counts["fallback"]


def test_concurrent_programs_batch_together(plugin, session) -> None:
    module, engine, _ = plugin
    doubler = module.Doubler()
    barrier = threading.Barrier(8)

    def one(i):
        with wrapped_run(run_in(session)):
            barrier.wait()
            return doubler.double([i])

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: contextvars.copy_context().run(one, i), range(8)))
    assert results == [[2 * i] for i in range(8)]
    assert sum(map(len, engine.batches)) == 8 and max(map(len, engine.batches)) > 1


def test_uninstall_restores_and_install_repatches(plugin) -> None:
    module, _, name = plugin
    original = Doubler.__dict__["double"]
    uninstall()
    assert module.Doubler.__dict__.get("double") is None and module.Doubler.double is original
    install()
    assert is_patched(name) and module.Doubler.double.__wrapped__ is original


def test_program_priorities() -> None:
    priorities = Priorities()
    run = WrappedRun(app="t")
    assert priorities.of(run) == 0
    run.add_service(QUANTUM_S * 4.5)
    assert priorities.of(run) == plas_level(run.attained_s) == 3  # log2(4.5) -> 2, + 1
    deep = WrappedRun(app="t", remaining_depth=lambda: 2)
    deep.add_service(100.0)
    assert priorities.of(deep) == 2  # known structure wins over attained service
    assert Priorities(enabled=False).of(deep) == Priorities(enabled=False).of(run) == 0


@pytest.mark.parametrize("on", [True, False])
def test_the_session_sends_program_priorities_unless_its_settings_switch_them_off(on: bool) -> None:
    session = Session(settings=Settings(program_priority=on))
    llm = FakeLLMEngine()
    spec = EngineSpec("llm", f"fake-llm-{uuid.uuid4().hex}", lambda: llm, EngineLimits(use_priority=True))
    try:
        for run in (WrappedRun(app="t", session=session, remaining_depth=lambda: 2), WrappedRun(app="t", session=session)):
            run.add_service(QUANTUM_S * 4.5)
            call = EngineCall(spec, [GenerationRequest(prompt="hi")], "t", shape=lambda results: results[0].text)
            assert session.call(run, call) == "reply to hi"
    finally:
        session.shutdown()
    assert [r.priority for r in llm.requests] == ([2, 3] if on else [0, 0])
    assert all(r.request_id.startswith("program") for r in llm.requests)


def test_a_blocking_call_on_the_session_loop_is_refused(session) -> None:
    spec = EngineSpec("embed", f"fake-{uuid.uuid4().hex}", lambda: FakeEngine("fake"))
    call = EngineCall(spec, [1], "t")
    run = run_in(session)

    async def on_loop():
        with pytest.raises(OnSessionLoop):
            session.call(run, call)
        return await session.acall(run, call)  # the async door serves the loop itself

    assert asyncio.run_coroutine_threadsafe(on_loop(), session.loop).result(10) == [1]


def test_langgraph_structure_depths() -> None:
    pytest.importorskip("langgraph")
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    from accel.adapters.langgraph.structure import read_structure

    class S(TypedDict, total=False):
        x: int

    def node(state):
        return {}

    builder = StateGraph(S)
    for name in ("a", "b", "c", "d", "loop"):
        builder.add_node(name, node)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: [Send("b", s)], ["b"])
    builder.add_edge("b", "c")
    builder.add_edge(["a", "c"], "d")
    builder.add_conditional_edges("d", lambda s: "loop" if s.get("x") else END, {"loop": "loop", END: END})
    builder.add_edge("loop", "a")  # a cycle: its back edge does not count
    structure = read_structure(builder.compile())
    assert structure.depth == {"a": 5, "b": 4, "c": 3, "d": 2, "loop": 1}  # a -> b -> c -> d -> loop
    config = {"metadata": {"langgraph_node": "c", "langgraph_checkpoint_ns": "c:123|inner:456"}}
    assert structure.remaining_depth(config) == 3
    assert structure.remaining_depth({"metadata": {}}) is None
