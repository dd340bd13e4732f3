"""Bad and hostile inputs, stock vs `accel.wrap`, on the LangChain and LlamaIndex naive-RAG
examples, the engines and the CLI.

    python -m accel.benchmarks.bad_inputs --llm-url http://127.0.0.1:PORT/v1 [--model tiny]

Each case names the behaviour expected: `as stock` (the wrapped app returns what stock returns
or raises stock's exception type), `typed` (an accel `EngineError` naming engine, cause and
remedy), `cli` (a non-zero exit with the typed message, no traceback). Every case runs under
a time bound (a hang fails it), no case may leak the test password, and a good query must
still answer as stock after the cases (other queries unaffected).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CASE_TIMEOUT_S = 90.0
SECRET = "s3cret-Pa55"
MB = "heap " * (1 << 20 // 5)
OVER_CONTEXT = "heap push pop " * 1500
GOOD = {"question": "How do I push an item onto a heap?"}


@dataclass
class Outcome:
    kind: str  # "ok", "error", "hang"
    detail: str

    @classmethod
    def of(cls, fn: Callable[[], Any], pool: ThreadPoolExecutor) -> Outcome:
        future = pool.submit(fn)
        try:
            value = future.result(timeout=CASE_TIMEOUT_S)
        except FutureTimeout:
            return cls("hang", f"no result in {CASE_TIMEOUT_S:.0f} s")
        except BaseException as exc:  # the outcome under test
            return cls("error", f"{type(exc).__name__}: {str(exc)[:300]}")
        return cls("ok", _short(value))


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, BaseException):
        return f"<{type(value).__name__}>"
    text = str(getattr(value, "response", value))
    return text if len(text) < 200 else text[:200] + "..."


@dataclass
class Case:
    surface: str
    name: str
    expect: str  # "as stock", "typed", "cli"
    accel: Callable[[], Any]
    stock: Callable[[], Any] | None = None


@dataclass
class Row:
    surface: str
    name: str
    expect: str
    stock: str
    accel: str
    passed: bool
    why: str = ""


def _error_type(outcome: Outcome) -> str:
    return outcome.detail.split(":", 1)[0] if outcome.kind == "error" else outcome.kind


def judge(case: Case, pool: ThreadPoolExecutor) -> Row:
    accel_out = Outcome.of(case.accel, pool)
    stock_out = Outcome.of(case.stock, pool) if case.stock else None
    passed, why = True, ""
    if accel_out.kind == "hang" or (stock_out and stock_out.kind == "hang" and accel_out.kind == "hang"):
        passed, why = False, "hang"
    elif case.expect == "as stock":
        assert stock_out is not None
        if stock_out.kind != accel_out.kind:
            passed, why = False, f"stock {stock_out.kind}, accel {accel_out.kind}"
        elif stock_out.kind == "error" and _error_type(stock_out) != _error_type(accel_out):
            passed, why = False, "different exception type"
        elif stock_out.kind == "ok" and stock_out.detail != accel_out.detail:
            passed, why = False, "different result"
    elif case.expect.startswith("raises "):
        if _error_type(accel_out) != case.expect.removeprefix("raises "):
            passed, why = False, f"not {case.expect}"
    elif case.expect.startswith("returns"):
        if accel_out.kind != "ok":
            passed, why = False, "did not return"
    elif case.expect == "typed":
        if accel_out.kind != "error" or "Remedy:" not in accel_out.detail:
            passed, why = False, "not a typed error with a remedy"
    elif case.expect == "cli":
        if accel_out.kind != "ok" or not accel_out.detail.startswith("exit "):
            passed, why = False, accel_out.detail
        elif "Traceback" in accel_out.detail or accel_out.detail.startswith("exit 0"):
            passed, why = False, "traceback or exit 0"
    for out in (accel_out, stock_out):
        if out is not None and SECRET in out.detail:
            passed, why = False, "the password leaked"
    return Row(case.surface, case.name, case.expect, stock_out.detail if stock_out else "-", accel_out.detail, passed, why)


# ---- the apps ---------------------------------------------------------------------------------


class Apps:
    def __init__(self, base_url: str, model: str, pg_dsn: str) -> None:
        import accel
        from accel.engines.embeddings import packaged_minilm_path
        from accel.engines.offline.reranker import build_reranker
        from accel.examples.corpus import pydoc_documents
        from accel.examples.langchain import models as lc_models
        from accel.examples.langchain import naive_rag as lc_rag
        from accel.examples.llamaindex import models as li_models
        from accel.examples.llamaindex import naive_rag as li_rag
        from accel.examples.stack import StackConfig

        self.config = StackConfig(base_url, model, pg_dsn, str(packaged_minilm_path()), str(build_reranker()),
                                  max_tokens=8, context_window=2048)
        docs = pydoc_documents(["heapq", "bisect"])
        self.lc_store = lc_models.build_index(self.config, docs, "bad_inputs")
        self.lc = lc_rag.build_app(self.config, self.lc_store)
        self.lc_wrapped = accel.wrap(self.lc)
        hostile = "x'; DROP TABLE langchain_pg_embedding; --"
        self.lc_hostile_store = lc_models.build_index(self.config, docs, hostile)
        self.lc_hostile = lc_rag.build_app(self.config, self.lc_hostile_store)
        self.lc_hostile_wrapped = accel.wrap(self.lc_hostile)
        index = li_models.build_index(self.config, docs, "bad_inputs_li")
        self.li = li_rag.build_app(self.config, index)
        self.li_wrapped = accel.wrap(self.li)
        hostile_index = li_models.build_index(self.config, docs, 'evil"; DROP TABLE data_bad_inputs_li; --')
        self.li_hostile = li_rag.build_app(self.config, hostile_index)
        self.li_hostile_wrapped = accel.wrap(self.li_hostile)


def langchain_cases(apps: Apps) -> list[Case]:
    s, a = apps.lc, apps.lc_wrapped
    inputs: dict[str, Any] = {
        "None": None, "a plain string": "heap", "an int": 42, "an empty dict": {}, "question=None": {"question": None},
        "question=123": {"question": 123}, "question=list": {"question": ["a", "b"]}, "empty question": {"question": ""},
        "1 MB question": {"question": MB}, "NUL byte": {"question": "heap\x00push"},
        "lone surrogate": {"question": "heap \ud800 push"}, "prompt over the context length": {"question": OVER_CONTEXT},
        "SQL in the question": {"question": "'; DROP TABLE langchain_pg_embedding; --"},
    }
    cases = [Case("langchain", f"invoke({name})", "as stock", (lambda v=v: a.invoke(v)), (lambda v=v: s.invoke(v)))
             for name, v in inputs.items()]
    cases += [
        Case("langchain", "invoke(config='not a config')", "as stock", lambda: a.invoke(GOOD, "x"), lambda: s.invoke(GOOD, "x")),
        Case("langchain", "batch([])", "as stock", lambda: a.batch([]), lambda: s.batch([])),
        Case("langchain", "abatch([])", "as stock", lambda: asyncio.run(a.abatch([])), lambda: asyncio.run(s.abatch([]))),
    ]
    for name, bad in (("None", None), ("1 MB", {"question": MB}), ("over context", {"question": OVER_CONTEXT}),
                      ("lone surrogate", {"question": "\ud800"})):
        for flag in (True, False):
            cases.append(Case("langchain", f"batch([good, {name}], return_exceptions={flag})", "as stock",
                              lambda bad=bad, flag=flag: a.batch([GOOD, bad], return_exceptions=flag),
                              lambda bad=bad, flag=flag: s.batch([GOOD, bad], return_exceptions=flag)))
    cases += [
        Case("langchain", "abatch([good, None], return_exceptions=True)", "as stock",
             lambda: asyncio.run(a.abatch([GOOD, None], return_exceptions=True)),
             lambda: asyncio.run(s.abatch([GOOD, None], return_exceptions=True))),
        Case("langchain", "ainvoke(None)", "as stock", lambda: asyncio.run(a.ainvoke(None)), lambda: asyncio.run(s.ainvoke(None))),
        Case("langchain", "ainvoke(NUL byte)", "as stock", lambda: asyncio.run(a.ainvoke({"question": "\x00"})),
             lambda: asyncio.run(s.ainvoke({"question": "\x00"}))),
        Case("langchain", "stream(None)", "as stock", lambda: "".join(a.stream(None)), lambda: "".join(s.stream(None))),
        Case("langchain", "stream(over context)", "as stock", lambda: "".join(a.stream({"question": OVER_CONTEXT})),
             lambda: "".join(s.stream({"question": OVER_CONTEXT}))),
        Case("langchain", "hostile PGVector collection name (quotes, SQL)", "as stock",
             lambda: apps.lc_hostile_wrapped.invoke(GOOD), lambda: apps.lc_hostile.invoke(GOOD)),
    ]
    return cases


def llamaindex_cases(apps: Apps) -> list[Case]:
    s, a = apps.li, apps.li_wrapped
    inputs: dict[str, Any] = {
        "None": None, "an int": 42, "a list": ["heap"], "empty string": "", "1 MB string": MB, "NUL byte": "heap\x00push",
        "lone surrogate": "heap \ud800 push", "prompt over the context length": OVER_CONTEXT,
    }
    cases = [Case("llamaindex", f"query({name})", "as stock", (lambda v=v: a.query(v)), (lambda v=v: s.query(v)))
             for name, v in inputs.items()]
    cases += [
        Case("llamaindex", "aquery(None)", "as stock", lambda: asyncio.run(a.aquery(None)), lambda: asyncio.run(s.aquery(None))),
        Case("llamaindex", "aquery(NUL byte)", "as stock", lambda: asyncio.run(a.aquery("heap\x00")),
             lambda: asyncio.run(s.aquery("heap\x00"))),
        Case("llamaindex", "hostile PGVectorStore table name (quotes, SQL)", "as stock",
             lambda: apps.li_hostile_wrapped.query(GOOD["question"]), lambda: apps.li_hostile.query(GOOD["question"])),
    ]
    return cases


def engine_cases(apps: Apps) -> list[Case]:
    """Engines called directly: typed errors with a remedy, hostile names never formatted into SQL."""
    from accel.engines.base import GenerationRequest, SamplingParams, VectorQuery
    from accel.engines.embeddings import SentenceTransformerEmbedder
    from accel.engines.llm.openai_client import OpenAIServerEngine
    from accel.engines.vectordb import PgVectorEngine

    dsn, config = apps.config.pg_dsn, apps.config

    def pg(*ops: Callable[[PgVectorEngine], Any]) -> Callable[[], Any]:
        async def run() -> Any:
            async with PgVectorEngine(dsn) as engine:
                result = None
                for op in ops:
                    result = await op(engine)
                return result
        return lambda: asyncio.run(run())

    def llm(request: Callable[[], GenerationRequest]) -> Callable[[], Any]:
        async def run() -> Any:
            engine = OpenAIServerEngine(config.openai_base_url, config.model)
            try:
                await engine.start()
                return await engine.run([request()])
            finally:
                await engine.stop()
        return lambda: asyncio.run(run())

    def embed(batch: list[Any]) -> Callable[[], Any]:
        async def run() -> Any:
            async with SentenceTransformerEmbedder(config.embed_model) as engine:
                return await engine.run(batch)
        return lambda: asyncio.run(run())

    vec = [0.1] * 384
    from accel.adapters.langchain.tables import pgvector_collection
    from accel.adapters.llamaindex.tables import pgvector_table

    lc = pgvector_collection("bad_inputs")
    hostile = ['a"; DROP TABLE langchain_pg_embedding; --', pgvector_collection("y'; DROP TABLE langchain_pg_embedding; --"),
               pgvector_table('x"; DROP TABLE data_bad_inputs_li; --'), "langchain:", "nolayout:x", "x" * 200]
    cases = [Case("engine", "PgVectorEngine.run([])", "typed", pg(lambda e: e.run([]))),
             Case("engine", "vector with NaN", "typed", pg(lambda e: e.run([VectorQuery([float("nan")] * 384, 3, lc)]))),
             Case("engine", "k=0", "typed", pg(lambda e: e.run([VectorQuery(vec, 0, lc)]))),
             Case("engine", "k='3'", "typed", pg(lambda e: e.run([VectorQuery(vec, "3", lc)]))),  # type: ignore[arg-type]
             Case("engine", "wrong dimension", "typed", pg(lambda e: e.run([VectorQuery([0.1] * 7, 3, lc)]))),
             Case("engine", "unknown metric", "typed", pg(lambda e: e.run([VectorQuery(vec, 3, lc, metric="dot")]))),  # type: ignore[arg-type]
             Case("engine", "create_collection('x; DROP TABLE')", "typed", pg(lambda e: e.create_collection("x; DROP TABLE y", 3)))]
    cases += [Case("engine", f"search collection {str(name)!r}", "typed", pg(lambda e, n=name: e.run([VectorQuery(vec, 3, n)])))
              for name in hostile]
    cases += [
        Case("engine", "search the existing LangChain collection named x'; DROP TABLE ...", "returns its own rows",
             pg(lambda e: e.run([VectorQuery(vec, 3, pgvector_collection("x'; DROP TABLE langchain_pg_embedding; --"))]))),
        Case("engine", "after the hostile names every table is in place", "returns", pg(_tables_intact)),
        Case("engine", "unreachable DSN with a password", "typed",
             lambda: asyncio.run(PgVectorEngine(f"postgresql://u:{SECRET}@127.0.0.1:1/db").start())),
        Case("engine", "embedder run([])", "typed", embed([])),
        Case("engine", "LLM prompt over the context length", "typed", llm(lambda: GenerationRequest(prompt=OVER_CONTEXT))),
        Case("engine", "LLM max_tokens=-1", "typed", llm(lambda: GenerationRequest(prompt="x", params=SamplingParams(max_tokens=-1)))),
        # what the openai SDK raises for stock: a wrapped app that re-runs or raises keeps stock's type
        Case("engine", "LLM lone surrogate in the prompt", "raises UnicodeEncodeError",
             llm(lambda: GenerationRequest(prompt="x \ud800"))),
    ]
    return cases


async def _tables_intact(engine: Any) -> str:
    async def names(conn: Any) -> set[str]:
        rows = await (await conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).fetchall()
        return {r[0] for r in rows}

    present = await engine._use(names, collection="-")
    missing = {"langchain_pg_embedding", "langchain_pg_collection", "data_bad_inputs_li"} - present
    if missing:
        raise AssertionError(f"tables missing after the hostile names: {sorted(missing)}")
    return "all tables present"


def cli_cases(apps: Apps) -> list[Case]:
    accel_bin = str(Path(sys.executable).with_name("accel"))

    def cli(args: list[str], env: dict[str, str], state: str | None = None) -> Callable[[], str]:
        def run() -> str:
            home = tempfile.mkdtemp(prefix="accel-bad-cli-")
            if state is not None:
                Path(home, "stack.json").write_text(state)
            full = {**os.environ, "ACCEL_HOME": home, **env}
            done = subprocess.run([accel_bin, *args], env=full, capture_output=True, text=True, timeout=CASE_TIMEOUT_S)
            return f"exit {done.returncode}: {(done.stdout + done.stderr)[-400:]}"
        return run

    secret_dsn = f"postgresql://u:{SECRET}@127.0.0.1:1/db"
    down_llm = "http://127.0.0.1:1/v1"
    return [
        Case("cli", "doctor --json, unreachable DSN with a password", "cli",
             cli(["doctor", "--json"], {"ACCEL_PG_DSN": secret_dsn, "ACCEL_OPENAI_BASE_URL": down_llm})),
        Case("cli", "up --json with a password DSN (nothing started)", "cli-ok",
             cli(["up", "--json"], {"ACCEL_PG_DSN": secret_dsn, "ACCEL_OPENAI_BASE_URL": down_llm})),
        Case("cli", "down with a corrupt state file", "cli", cli(["down"], {}, state="{not json")),
        Case("cli", "down with a state file of unknown keys", "cli", cli(["down"], {}, state='{"who": 1}')),
        Case("cli", "up with a corrupt state file", "cli", cli(["up"], {}, state="\x00\x01")),
        Case("cli", "an unknown option", "cli", cli(["doctor", "--no-such-flag"], {})),
        Case("cli", "bench of an unknown example", "cli", cli(["bench", "compare", "no-such-example"], {})),
    ]


def run_all(apps: Apps) -> list[Row]:
    rows = []
    with ThreadPoolExecutor(4, thread_name_prefix="bad-input") as pool:
        for case in [*langchain_cases(apps), *llamaindex_cases(apps), *engine_cases(apps), *cli_cases(apps)]:
            if case.expect == "cli-ok":  # must succeed and print no password
                out = Outcome.of(case.accel, pool)
                ok = out.kind == "ok" and out.detail.startswith("exit 0") and SECRET not in out.detail
                rows.append(Row(case.surface, case.name, "exit 0, no password printed", "-", out.detail, ok,
                                "" if ok else "password printed or failed"))
                continue
            rows.append(judge(case, pool))
        after = Outcome.of(lambda: apps.lc_wrapped.invoke(GOOD), pool)
        stock = Outcome.of(lambda: apps.lc.invoke(GOOD), pool)
        rows.append(Row("langchain", "a good query after all the cases", "as stock", stock.detail, after.detail,
                        after.detail == stock.detail and after.kind == "ok"))
    return rows


def markdown(rows: Sequence[Row]) -> str:
    lines = ["| surface | input | expected | stock | accel | pass |", "|---|---|---|---|---|---|"]
    for r in rows:
        cell = lambda t: t.replace("|", "\\|").replace("\n", " ")[:160]  # noqa: E731
        lines.append(f"| {r.surface} | {cell(r.name)} | {r.expect} | {cell(r.stock)} | {cell(r.accel)} | "
                     f"{'yes' if r.passed else 'NO: ' + r.why} |")
    passed = sum(r.passed for r in rows)
    return "\n".join(lines) + f"\n\n{passed}/{len(rows)} passed."


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm-url", required=True, help="a vLLM server serving the tiny offline model")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log_path = Path(tempfile.mkdtemp(prefix="accel-bad-log-")) / "log.txt"
    logging.basicConfig(filename=log_path, level=logging.DEBUG)

    from accel.engines.vectordb import start_local_postgres, stop_local_postgres

    root = Path(tempfile.mkdtemp(prefix="accel-bad-pg-"))
    root.chmod(0o755)
    dsn = start_local_postgres(root / "pg")
    try:
        # the password is accepted and ignored by the local socket's trust auth: it travels
        # everywhere a real one would, so it must show up nowhere
        secret_dsn = dsn.replace("postgresql://postgres:@", f"postgresql://postgres:{SECRET}@")
        apps = Apps(args.llm_url, args.model, secret_dsn)
        rows = run_all(apps)
    finally:
        stop_local_postgres(root / "pg")
    spans = exporter.get_finished_spans()
    leaked_span = any(SECRET in json.dumps(dict(s.attributes or {}), default=str) or SECRET in s.name for s in spans)
    leaked_log = SECRET in log_path.read_text(errors="replace")
    rows.append(Row("all", f"password in {len(spans)} spans / the DEBUG log", "never", "-",
                    f"spans: {'LEAKED' if leaked_span else 'absent'}; log: {'LEAKED' if leaked_log else 'absent'}",
                    not (leaked_span or leaked_log)))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))
    print(markdown(rows))


if __name__ == "__main__":
    main()
