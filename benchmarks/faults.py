"""Fault campaign: break the engines under a running LangChain RAG app, stock and `accel.wrap`.

    python -m accel.benchmarks.faults [--only kill-llm,postgres,...] [--json out.json]

On its own stack (`fault_stack.FaultStack`: a private Postgres and vLLM server on the tiny
offline model), with the naive-RAG example over a few pydoc pages. Every fault runs on the
stock app and on the wrapped app. Per fault it reports: queries run, queries affected (still
running when the fault hit), failed, hangs (not returned within `HANG_S`; 0 allowed), the
seconds from the fault until the last affected query returned, the answers after recovery
that equal stock's, and the recovery time (the restored engine back -> first answer from the
same app object, never rebuilt). Bounded: 16 queries per fault, a hang bound per wait.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any

from accel.benchmarks.fault_stack import DelayProxy, FaultStack, wait_until

HANG_S = 120.0
N_QUERIES = 16
SHORT_TOKENS = 24
LONG_TOKENS = 1200
MODULES = ["heapq", "bisect", "functools", "itertools"]


@dataclass
class FaultResult:
    fault: str
    system: str
    queries: int
    affected: int
    failed: int
    hangs: int
    fail_after_s: float | None = None  # fault -> last affected query returned
    recovery_s: float | None = None
    equal_after: str = ""  # answers after recovery equal to stock's reference, "k/n"
    errors: dict[str, int] = field(default_factory=dict)
    note: str = ""


@dataclass
class Outcome:
    ends: list[float | None]
    answers: list[str | None]
    errors: list[str | None]

    @property
    def hangs(self) -> int:
        return sum(end is None for end in self.ends)


def _questions(n: int = N_QUERIES) -> list[str]:
    topics = ["push an item onto a heap", "find an insertion point", "cache a function", "chain iterables",
              "merge sorted inputs", "partial application", "group consecutive items", "bisect a sorted list"]
    return [f"How do I {topics[i % len(topics)]}? (case {i})" for i in range(n)]


class Apps:
    """Stock and wrapped naive-RAG apps over one index, per (base_url, max_tokens, async): a
    PGVector store serves sync or async calls, never both, so async apps read the same
    collection through an `async_mode=True` store."""

    def __init__(self, stack: FaultStack) -> None:
        from accel.engines.embeddings import packaged_minilm_path
        from accel.engines.offline.reranker import build_reranker
        from accel.examples.corpus import pydoc_documents
        from accel.examples.langchain.models import build_index
        from accel.examples.stack import StackConfig

        self.stack = stack
        self._config = StackConfig(stack.base_url, stack.model, stack.pg_dsn, str(packaged_minilm_path()),
                                   str(build_reranker()), max_tokens=SHORT_TOKENS, context_window=2048)
        self.store = build_index(self._config, pydoc_documents(MODULES), "faults")
        self._apps: dict[tuple[str, int, bool], tuple[Any, Any]] = {}

    def _async_store(self) -> Any:
        from langchain_postgres import PGVector

        from accel.examples.stack import sqlalchemy_url

        return PGVector(embeddings=self.store.embeddings, collection_name=self.store.collection_name,
                        connection=sqlalchemy_url(self._config.pg_dsn, "psycopg"), use_jsonb=True, async_mode=True)

    def get(self, system: str, *, base_url: str | None = None, max_tokens: int = SHORT_TOKENS,
            asynchronous: bool = False) -> Any:
        import accel
        from dataclasses import replace

        from accel.examples.langchain.naive_rag import build_app

        key = (base_url or self.stack.base_url, max_tokens, asynchronous)
        if key not in self._apps:
            store = self._async_store() if asynchronous else self.store
            stock = build_app(replace(self._config, openai_base_url=key[0], max_tokens=max_tokens), store)
            self._apps[key] = (stock, accel.wrap(stock))
        stock, wrapped = self._apps[key]
        return stock if system == "stock" else wrapped


def _invoke(app: Any, question: str) -> tuple[float, str | None, str | None]:
    try:
        answer = app.invoke({"question": question})
    except Exception as exc:  # recorded per query: the campaign counts failures by type
        return time.perf_counter(), None, type(exc).__name__
    return time.perf_counter(), str(answer), None


def run_queries(app: Any, questions: Sequence[str], *, fault: Callable[[], None] | None = None,
                trigger: Callable[[], bool] | None = None, spacing_s: float = 0.0) -> tuple[Outcome, float | None]:
    """Run the questions on threads (spaced `spacing_s` apart); once `trigger()` holds (or at
    once), run `fault()`. Returns the outcome and when the fault began."""
    pool = ThreadPoolExecutor(len(questions), thread_name_prefix="fault-query")
    futures = []
    for question in questions:
        futures.append(pool.submit(_invoke, app, question))
        if spacing_s:
            time.sleep(spacing_s)
    fault_at = None
    if fault is not None:
        if trigger is not None:
            wait_until(trigger, 60)
        fault_at = time.perf_counter()
        fault()
    wait(futures, timeout=HANG_S)
    ends, answers, errors = [], [], []
    for future in futures:
        if future.done():
            end, answer, error = future.result()
        else:
            end, answer, error = None, None, "hang"
        ends.append(end)
        answers.append(answer)
        errors.append(error)
    pool.shutdown(wait=False, cancel_futures=True)
    return Outcome(ends, answers, errors), fault_at


def _summary(fault: str, system: str, outcome: Outcome, fault_at: float | None) -> FaultResult:
    affected = [i for i, end in enumerate(outcome.ends) if fault_at is not None and (end is None or end >= fault_at)]
    failed = [i for i, error in enumerate(outcome.errors) if error is not None]
    ends = [outcome.ends[i] for i in affected if outcome.ends[i] is not None]
    return FaultResult(
        fault, system, len(outcome.ends), len(affected), len(failed), outcome.hangs,
        fail_after_s=round(max(ends) - fault_at, 3) if ends and fault_at is not None else None,
        errors=dict(Counter(outcome.errors[i] for i in failed)),
    )


def _recover(app: Any, question: str, ready_at: float, attempts: int = 20) -> float | None:
    """Seconds from `ready_at` to the first answer of the same app object (bounded attempts)."""
    for _ in range(attempts):
        _, answer, _ = _invoke(app, question)
        if answer is not None:
            return round(time.perf_counter() - ready_at, 3)
    return None


def _equal(app: Any, questions: Sequence[str], reference: dict[str, str]) -> str:
    outcome, _ = run_queries(app, questions)
    same = sum(answer == reference[q] for q, answer in zip(questions, outcome.answers))
    return f"{same}/{len(questions)}"


# ---- the faults -------------------------------------------------------------------------------


def _generating(stack: FaultStack, tokens: int) -> Callable[[], bool]:
    """A trigger: the server has generated `tokens` more since now, far fewer than the queries'
    long answers need, so every one is mid-answer (the running-requests gauge, read late under
    load, once let every accel query finish before the kill)."""
    start = stack.generated_tokens()
    return lambda: stack.generated_tokens() - start >= tokens


def kill_llm(stack: FaultStack, apps: Apps, system: str, reference: dict[str, str]) -> FaultResult:
    questions = _questions()
    app = apps.get(system, max_tokens=LONG_TOKENS)
    outcome, fault_at = run_queries(app, questions, fault=stack.kill_llm, trigger=_generating(stack, 20 * len(questions)))
    result = _summary("kill the vLLM server while 16 queries run", system, outcome, fault_at)
    stack.start_llm()
    ready = time.perf_counter()
    short = apps.get(system)
    result.recovery_s = _recover(short, questions[0], ready)
    result.equal_after = _equal(short, questions, reference)
    result.note = "SIGKILL of the server's process group; restarted on the same port"
    return result


def restart_postgres(stack: FaultStack, apps: Apps, system: str, reference: dict[str, str]) -> FaultResult:
    questions = _questions()
    app = apps.get(system)
    down_s = 1.0

    def fault() -> None:
        stack.stop_pg()
        time.sleep(down_s)  # the outage: queries arriving now find no server
        stack.start_pg()

    outcome, fault_at = run_queries(app, questions, fault=fault, spacing_s=0.05)
    result = _summary("stop Postgres for 1 s mid-run, then restart it", system, outcome, fault_at)
    result.recovery_s = _recover(app, questions[0], time.perf_counter())
    result.equal_after = _equal(app, questions, reference)
    result.note = "queries spaced 50 ms apart; recovery measured from the restart's return"
    return result


def slow_llm(stack: FaultStack, apps: Apps, system: str, reference: dict[str, str], delay_s: float = 0.3) -> FaultResult:
    proxy = DelayProxy(stack.port, delay_s)
    try:
        app = apps.get(system, base_url=proxy.base_url)
        began = time.perf_counter()
        outcome, _ = run_queries(app, _questions())
        elapsed = time.perf_counter() - began
    finally:
        proxy.close()
    result = _summary(f"vLLM behind a proxy adding {delay_s * 1000:.0f} ms per request chunk", system, outcome, None)
    result.affected = len(outcome.ends)
    same = sum(a == reference[q] for q, a in zip(_questions(), outcome.answers))
    result.equal_after = f"{same}/{len(outcome.answers)}"
    result.note = f"16 queries finished in {elapsed:.2f} s"
    return result


def cancel_mid_flight(stack: FaultStack, apps: Apps, system: str, reference: dict[str, str]) -> FaultResult:
    """Cancel 8 running `ainvoke`s; the server's running+waiting requests must return to 0."""
    app = apps.get(system, max_tokens=LONG_TOKENS, asynchronous=True)
    questions = _questions(8)

    async def scenario() -> tuple[int, tuple[float | None, int]]:
        running = _generating(stack, 20 * len(questions))
        tasks = [asyncio.create_task(app.ainvoke({"question": q})) for q in questions]
        await asyncio.to_thread(wait_until, running, 60)
        for task in tasks:
            task.cancel()
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), HANG_S)
        cancelled = sum(isinstance(r, asyncio.CancelledError) for r in results)
        return cancelled, await asyncio.to_thread(stack.generation_stopped)

    began = time.perf_counter()
    cancelled, (stopped, tokens) = asyncio.run(scenario())
    result = FaultResult("cancel 8 ainvoke() mid-generation", system, len(questions), len(questions),
                         len(questions) - cancelled, 0, fail_after_s=round(time.perf_counter() - began, 3))
    result.recovery_s = round(stopped, 3) if stopped is not None else None
    result.equal_after = _equal(apps.get(system), _questions(), reference)
    result.note = f"{cancelled}/{len(questions)} raised CancelledError; " + _generation_note(stopped, tokens, "cancel")
    return result


def _generation_note(stopped: float | None, tokens: int, event: str) -> str:
    """What the server's generated-token counter showed after `event` (the abort's evidence)."""
    if stopped is None:
        return f"the server still generated 30 s after the {event} ({tokens} tokens)"
    return f"the server's last token {stopped:.2f} s after the {event} ({tokens} tokens after it)"


def leave_stream_early(stack: FaultStack, apps: Apps, system: str, reference: dict[str, str]) -> FaultResult:
    app = apps.get(system, max_tokens=LONG_TOKENS)
    chunks = 0
    for _ in app.stream({"question": _questions(1)[0]}):
        chunks += 1
        if chunks == 3:
            break
    stopped, tokens = stack.generation_stopped()
    result = FaultResult("stream(): break after 3 chunks", system, 1, 1, 0, 0)
    result.recovery_s = round(stopped, 3) if stopped is not None else None
    result.equal_after = _equal(apps.get(system), _questions(), reference)
    result.note = _generation_note(stopped, tokens, "break")
    return result


FAULTS: dict[str, Callable[..., FaultResult]] = {
    "kill-llm": kill_llm,
    "postgres": restart_postgres,
    "slow-llm": slow_llm,
    "cancel": cancel_mid_flight,
    "stream-exit": leave_stream_early,
}


def campaign(only: Sequence[str] = tuple(FAULTS), progress: Callable[[str], None] = lambda _: None,
             load_minutes: float = 0.0) -> dict[str, Any]:
    stack = FaultStack()
    try:
        apps = Apps(stack)
        stock = apps.get("stock")
        reference = {q: str(stock.invoke({"question": q})) for q in _questions()}
        results = []
        for name in only:
            for system in ("stock", "accel"):
                progress(f"{name} / {system}")
                result = FAULTS[name](stack, apps, system, reference)
                progress(json.dumps(asdict(result)))
                results.append(asdict(result))
        report: dict[str, Any] = {"results": results, "hang_bound_s": HANG_S}
        if load_minutes > 0:
            progress(f"load run, {load_minutes} min")
            from accel.benchmarks.fault_load import load_run

            report["load"] = load_run(stack, apps, reference, load_minutes)
            progress(json.dumps(report["load"]))
        return report
    finally:
        stack.close()


def markdown(report: dict[str, Any]) -> str:
    return "\n\n".join(filter(None, [_fault_table(report), _load_table(report.get("load"))]))


def _load_table(load: dict[str, Any] | None) -> str:
    if not load:
        return ""
    head = (f"Load: {load['minutes']} min of Poisson arrivals at {load['rate_qps']} queries/s (90% of the "
            f"measured {load['capacity_qps']}/s); sent {load['sent']}, answered {load['answered']}, hangs "
            f"{load['hangs']}, equal to stock {load['equal_to_stock']}.")
    rows = ["| minute | queries | p50 s | p99 s | RSS MiB | threads | engine queue (max) |", "|---|---|---|---|---|---|---|"]
    rows += [f"| {m['minute']} | {m['queries']} | {m['p50_s']} | {m['p99_s']} | {m['rss_mib']} | {m['threads']} | {m['queued_max']} |"
             for m in load["per_minute"]]
    return head + "\n\n" + "\n".join(rows)


def _fault_table(report: dict[str, Any]) -> str:
    rows = ["| fault | system | queries | affected | failed | hangs | fault → last return (s) | recovery (s) | equal to stock after | errors | note |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        errors = ", ".join(f"{k} ×{v}" for k, v in r["errors"].items()) or "-"
        rows.append(f"| {r['fault']} | {r['system']} | {r['queries']} | {r['affected']} | {r['failed']} | {r['hangs']} | "
                    f"{r['fail_after_s'] if r['fail_after_s'] is not None else '-'} | "
                    f"{r['recovery_s'] if r['recovery_s'] is not None else '-'} | {r['equal_after'] or '-'} | {errors} | {r['note']} |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(FAULTS), help=f"comma-separated subset of {list(FAULTS)}")
    parser.add_argument("--json", default=None, help="write the report here")
    parser.add_argument("--load-minutes", type=float, default=0.0, help="then a load run at ~90%% of capacity")
    args = parser.parse_args(argv)
    report = campaign([name.strip() for name in args.only.split(",") if name.strip()],
                      progress=lambda msg: print(msg, file=sys.stderr, flush=True), load_minutes=args.load_minutes)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    print(markdown(report))


if __name__ == "__main__":
    main()
