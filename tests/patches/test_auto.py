"""Auto-instrumentation in fresh interpreters: ACCEL_AUTO / accel-run accelerate an unchanged
LCEL app; without the variable LangChain is untouched; uninstrument restores the originals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

APP = '''
import asyncio, json, sys, threading
from langchain_core.runnables import RunnableLambda, RunnableSequence

def where(x):
    scope = sys.modules.get("accel.scope")  # the app imports no accel code; accel-run does
    wrapped = scope is not None and scope.current_run() is not None
    return {"value": x * 2, "thread": threading.current_thread().name, "wrapped": wrapped}

chain = RunnableLambda(lambda x: x + 1) | RunnableLambda(where)
out = chain.invoke(1)
batch = chain.batch([1, 2])
aout = asyncio.run(chain.ainvoke(3))
print(json.dumps({"out": out, "batch": batch, "aout": aout,
                  "patched": hasattr(RunnableSequence.invoke, "__wrapped__")}))
'''


def _run(tmp_path: Path, command: list[str], env_extra: dict[str, str]) -> dict:
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = {k: v for k, v in os.environ.items() if k != "ACCEL_AUTO"} | env_extra
    done = subprocess.run([*command, str(app)], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_the_variable_langchain_is_untouched(tmp_path: Path) -> None:
    sitecustomize = str(Path(__import__("accel.patches.run", fromlist=["BOOTSTRAP"]).BOOTSTRAP))
    result = _run(tmp_path, [sys.executable], {"PYTHONPATH": sitecustomize})
    assert result["patched"] is False
    assert result["out"] == {"value": 4, "thread": "MainThread", "wrapped": False}


def test_accel_run_accelerates_the_unchanged_app(tmp_path: Path) -> None:
    """The chain goes through accel.wrap (its code runs inside a wrapped run); with nothing
    to lower, its steps run where stock runs them: the caller's thread."""
    result = _run(tmp_path, [sys.executable, "-m", "accel.patches.run", sys.executable], {})
    assert result["patched"] is True
    assert result["out"] == {"value": 4, "thread": "MainThread", "wrapped": True}
    assert [r["value"] for r in result["batch"]] == [4, 6] and all(r["wrapped"] for r in result["batch"])
    assert result["aout"]["value"] == 8 and result["aout"]["wrapped"]


def test_env_var_with_the_bootstrap_on_the_path(tmp_path: Path) -> None:
    from accel.patches.run import BOOTSTRAP

    result = _run(tmp_path, [sys.executable], {"ACCEL_AUTO": "1", "PYTHONPATH": str(BOOTSTRAP)})
    assert result["patched"] is True and result["out"]["wrapped"]


def test_uninstrument_restores_the_originals() -> None:
    code = '''
import json
from langchain_core.runnables.base import RunnableSequence
before = {n: RunnableSequence.__dict__[n] for n in ("invoke", "ainvoke", "batch", "abatch")}
import accel.patches as p
assert p.instrument(force=True)
patched = all(RunnableSequence.__dict__[n] is not f for n, f in before.items())
p.uninstrument()
restored = all(RunnableSequence.__dict__[n] is f for n, f in before.items())
print(json.dumps([patched, restored]))
'''
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, True]


def test_instrument_is_a_no_op_without_the_variable(monkeypatch) -> None:
    import accel.patches as p

    monkeypatch.delenv("ACCEL_AUTO", raising=False)
    assert p.instrument() is False
    assert p.AccelInstrumentor().instrumentation_dependencies() == ()


def test_instrumentor_is_an_opentelemetry_instrumentation_honouring_tracer_provider() -> None:
    code = '''
import json
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from langchain_core.runnables.base import RunnableSequence
from accel.patches import AccelInstrumentor
from accel.tracer.spans import get_tracer

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
inst = AccelInstrumentor()
inst.instrument(tracer_provider=provider)
patched = hasattr(RunnableSequence.invoke, "__wrapped__")
with get_tracer().start_as_current_span("probe"):
    pass
inst.uninstrument()
print(json.dumps([isinstance(inst, BaseInstrumentor), patched, [s.name for s in exporter.get_finished_spans()],
                  hasattr(RunnableSequence.invoke, "__wrapped__")]))
'''
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, True, ["probe"], False]
