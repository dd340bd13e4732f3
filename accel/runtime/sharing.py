"""Halo's de-duplication: identical deterministic engine requests of one batch call are
computed once and their result handed to every query that asks for it.

A `ShareScope` is a context variable entered by a batch entry point (a wrapped chain's `batch` /
`abatch`, `accel.batch(app, inputs)`); everything the batch's queries run inherits it (worker
threads copy the context, session tasks copy the submitting thread's context). Inside a scope
the engine schedulers send each request with a content key (`request_key`) through the scope:

- the first query to ask for a key starts one engine task for that request alone, owned by the
  scope and by the queries waiting on it (it is cancelled only when every waiter has gone);
- later queries with the same key wait for that task, or take its kept result: results live as
  long as the scope, so a repeat arriving after the first finished is still served from it;
- each query gets its own deep copy of the result, so no query sees another's mutations;
- a failing shared request fails every query that waits on it with the same exception, and no
  other query (the request has a task of its own, never batched into another query's task).

Only deterministic requests have a key: greedy LLM decoding (temperature 0) or a fixed seed,
embeddings, reranker pairs, vector and text searches. Streamed requests and anything of an
unknown type run unshared. The scope counts what it shared per engine kind (`explain()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import json
import logging
import threading
from collections import Counter
from collections.abc import Hashable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accel.engines.base import GenerationRequest, TextQuery, VectorQuery
from accel.engines.llm.api_call import APICall
from accel.ir.marks import SHARE_REQUESTS as PASS  # the pass that switches sharing on for an app
from accel.runtime.task import EngineTask

if TYPE_CHECKING:
    from accel.runtime.engine_scheduler import EngineScheduler

log = logging.getLogger("accel.runtime.sharing")



# ---- content keys ------------------------------------------------------------------------------


def request_key(request: Any) -> Hashable | None:
    """A key equal for requests whose results must be equal, or None when the request may not
    be shared (sampling without a seed, streaming, a type accel does not know)."""
    if isinstance(request, str):
        return ("text", request)
    if isinstance(request, tuple) and len(request) == 2 and all(isinstance(t, str) for t in request):
        return ("pair", request)
    if isinstance(request, GenerationRequest):
        return _generation_key(request)
    if isinstance(request, APICall):
        return _api_key(request)
    if isinstance(request, VectorQuery):
        return ("vector", tuple(request.vector), request.k, request.collection, request.metric, _canon(request.filter))
    if isinstance(request, TextQuery):
        return ("search", request.query, request.k)
    return _embed_key(request)


def _embed_key(request: Any) -> Hashable | None:
    from accel.engines.embeddings import EmbedRequest

    if isinstance(request, EmbedRequest):
        return ("embed", request.text, request.normalize, request.prompt)
    return None


def _generation_key(request: GenerationRequest) -> Hashable | None:
    params = request.params
    if params.temperature != 0 and params.seed is None:
        return None
    body = request.prompt if request.prompt is not None else (
        _canon(request.messages) if request.messages is not None else tuple(request.prompt_token_ids or ()))
    kind = "prompt" if request.prompt is not None else "messages" if request.messages is not None else "tokens"
    return ("generate", kind, body, params.max_tokens, params.temperature, params.top_p, tuple(params.stop),
            params.seed, _canon(params.extra))


def _api_key(call: APICall) -> Hashable | None:
    """A forwarded client request: greedy (or seeded) and not streamed. The key is the URL and
    the request body (the client's own bytes, canonicalised), never headers such as retry
    counts that do not change the answer."""
    try:
        payload = json.loads(call.body) if call.body else None
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("stream"):
        return None
    if payload.get("temperature") != 0 and payload.get("seed") is None:
        return None  # the server's default temperature samples
    payload.pop("priority", None)
    return ("api", call.method, call.url, _canon(payload))


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


# ---- the scope ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _Entry:
    """One shared request: the task computing it and the queries waiting for it."""

    job: asyncio.Task[list[Any]]
    waiters: int = 0


@dataclass(eq=False)
class ShareScope:
    """The shared requests of one batch call. Entries are touched only on the session loop;
    the counters are read from the caller's thread, under a lock."""

    entries: dict[tuple[str, Hashable], _Entry] = field(default_factory=dict)
    shared: Counter[str] = field(default_factory=Counter)
    """Requests served from another query's request, per engine kind."""
    computed: Counter[str] = field(default_factory=Counter)
    """Keyed requests sent to an engine (the first of each key), per engine kind."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {f"shared {kind} requests": n for kind, n in sorted(self.shared.items())}

    def _count(self, counter: Counter[str], kind: str) -> None:
        with self._lock:
            counter[kind] += 1

    async def submit(self, scheduler: EngineScheduler, task: EngineTask) -> list[Any]:
        """`task`'s results in request order, each keyed request computed once per scope."""
        keys = [request_key(r) for r in task.requests]
        if all(k is None for k in keys):
            return await scheduler.submit_unshared(task)
        kind = str(getattr(scheduler.engine, "kind", scheduler.name))
        results: list[Any] = [None] * len(keys)
        plain = [i for i, k in enumerate(keys) if k is None]
        waits: list[tuple[int, asyncio.Future[Any] | Any]] = []
        if plain:
            sub = _subtask(task, [task.requests[i] for i in plain])
            waits.append((-1, asyncio.ensure_future(scheduler.submit_unshared(sub))))
        for i, key in enumerate(keys):
            if key is not None:
                waits.append((i, asyncio.ensure_future(self._shared(scheduler, kind, (scheduler.name, key), task, i))))
        try:
            await asyncio.gather(*(w for _, w in waits))
        except BaseException:
            for _, w in waits:
                w.cancel()
            await asyncio.gather(*(w for _, w in waits), return_exceptions=True)
            raise
        for i, w in waits:
            if i < 0:
                for j, value in zip(plain, w.result()):
                    results[j] = value
            else:
                results[i] = w.result()
        return results

    async def _shared(self, scheduler: EngineScheduler, kind: str, key: tuple[str, Hashable], task: EngineTask, index: int) -> Any:
        entry = self.entries.get(key)
        if entry is None or entry.job.cancelled():
            sub = _subtask(task, [task.requests[index]])
            job = asyncio.get_running_loop().create_task(scheduler.submit_unshared(sub), name=f"accel-shared-{task.node}")
            job.add_done_callback(_retrieve)
            entry = self.entries[key] = _Entry(job)
            self._count(self.computed, kind)
        else:
            self._count(self.shared, kind)
        entry.waiters += 1
        try:
            [value] = await asyncio.shield(entry.job)  # leaving early must not stop others' work
        finally:
            entry.waiters -= 1
            if entry.waiters == 0 and not entry.job.done():
                entry.job.cancel()  # nobody waits any more: stop the engine work
                if self.entries.get(key) is entry:
                    del self.entries[key]
        return copy.deepcopy(value)


def _subtask(task: EngineTask, requests: list[Any]) -> EngineTask:
    return EngineTask(task.query_id, task.node, task.depth, requests, arrival=task.arrival, priority=task.priority,
                      objective=task.objective)


def _retrieve(job: asyncio.Task[Any]) -> None:
    """Its waiters re-raise a failure themselves; mark it seen for the loop's logger."""
    if not job.cancelled():
        job.exception()


_scope: contextvars.ContextVar[ShareScope | None] = contextvars.ContextVar("accel_share_scope", default=None)


def current_scope() -> ShareScope | None:
    return _scope.get()


def sharing_enabled(template: Any) -> bool:
    """A lowered app shares unless its `share_requests` pass was switched off; an app that
    runs as-is (no template) shares its captured engine calls."""
    if template is None:
        return True
    return PASS in template.graph.meta.get("passes", ())


@contextlib.contextmanager
def batch_scope(template: Any = None, counters: MutableMapping[str, int] | None = None) -> Iterator[ShareScope | None]:
    """Enter a share scope for one batch call (a no-op inside an outer scope, or when the
    app's sharing pass is off); what it shared is added to `counters` at the end."""
    if _scope.get() is not None or not sharing_enabled(template):
        yield _scope.get()
        return
    scope = ShareScope()
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)
        counts = scope.counts()
        if counts:
            log.info("batch: %s", ", ".join(f"{n} {name}" for name, n in counts.items()))
        if counters is not None:
            for name, n in counts.items():
                counters[name] = counters.get(name, 0) + n
