"""Halo's de-duplication: identical deterministic engine requests of one batch call are
computed once and their result handed to every query that asks for it.

A `ShareScope` is a context variable entered by a batch entry point (a wrapped chain's `batch` /
`abatch`, `accel.batch(app, inputs)`); everything the batch's queries run inherits it (worker
threads copy the context, session tasks copy the submitting thread's context). Inside a scope
the engine schedulers send each request with a content key (`request_key`) through the scope:

- a query's requests whose keys the scope does not know yet (and its unkeyed ones) go to the
  engine together as one task, as they would without the scope: the scope only ever takes
  requests away from a task, so a batch with nothing to share is batched and scheduled as
  without it (one task per request made every embedding and rerank pair a task of its own:
  11% of advanced RAG's batch on the twins, where it shared 27 rerank pairs of 512);
- that task is owned by the scope and by the queries waiting on any of its requests (it is
  cancelled only when every waiter has gone); later queries asking for one of its keys wait for
  it, or take its kept result: results live as long as the scope, so a repeat arriving after
  the first finished is still served from it;
- each query gets its own deep copy of a keyed result, so no query sees another's mutations;
- a failing request fails the query that sent it and every query waiting for exactly that
  request; a query waiting for another request of the failed task runs that request alone
  (shared again), so one query's bad request never fails another's.

A streamed LLM request (decode pipelining's PartialDecode) is shared the same way
(`ShareScope.stream`): the first query asking for it streams it from the engine, and every
query asking for the same key, while it streams or after, gets its chunks from the start, as
they arrive; the final generation is each query's own copy. Streamed and plain requests are
shared separately (their results arrive differently).

Only deterministic requests have a key: greedy LLM decoding (temperature 0) or a fixed seed,
embeddings, reranker pairs, vector and text searches. Anything of an unknown type runs
unshared. The scope counts what it shared per engine kind (`explain()`).
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
from collections.abc import AsyncIterator, Hashable, Iterator, MutableMapping
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from accel.engines.base import GenerationChunk, GenerationRequest, TextQuery, VectorQuery
from accel.engines.llm.api_call import APICall
from accel.ir.marks import SHARE_REQUESTS as PASS  # the pass that switches sharing on for an app
from accel.runtime.streams import ItemStream
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
class _Group:
    """Keyed requests of one query's task not yet known to the scope, sent as one engine task
    (as the query would send them unshared), with the queries waiting on any of them."""

    job: asyncio.Task[list[Any]]
    keys: list[tuple[str, Hashable]]
    size: int
    """Requests in the job, keyed or not: a failure of a job of more than one may be another's."""
    waiters: int = 0


@dataclass(eq=False)
class _Stream:
    """One shared streamed request: its chunks (an `ItemStream`, replayed to every listener
    and kept for later queries), how it failed, and the job pumping it while anyone listens."""

    job: asyncio.Task[None] | None = None
    chunks: ItemStream = field(default_factory=ItemStream)
    error: BaseException | None = None
    listeners: int = 0


@dataclass(eq=False)
class ShareScope:
    """The shared requests of one batch call. Entries are touched only on the session loop;
    the counters are read from the caller's thread, under a lock."""

    entries: dict[tuple[str, Hashable], tuple[_Group, int]] = field(default_factory=dict)
    """Each key's group and its place in the group's results."""
    streams: dict[tuple[str, Hashable], _Stream] = field(default_factory=dict)
    """Each streamed request's key and its shared stream."""
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

    def _known(self, key: tuple[str, Hashable]) -> tuple[_Group, int] | None:
        found = self.entries.get(key)
        return None if found is None or found[0].job.cancelled() else found

    async def submit(self, scheduler: EngineScheduler, task: EngineTask) -> list[Any]:
        """`task`'s results in request order, each keyed request computed once per scope.

        The requests whose key the scope does not know yet, and those with no key, go to the
        engine together as one task of this query's, so a batch with nothing to share is
        scheduled as it would be without the scope; only the known keys wait on the groups
        that compute them."""
        keys = [request_key(r) for r in task.requests]
        if all(k is None for k in keys):
            return await scheduler.submit_unshared(task)
        kind = str(getattr(scheduler.engine, "kind", scheduler.name))
        places: list[tuple[_Group | None, int]] = []  # None: this query's own group
        own: list[int] = []
        new: dict[tuple[str, Hashable], int] = {}
        for i, key in enumerate(keys):
            full = (scheduler.name, key) if key is not None else None
            if full is not None and (found := self._known(full)) is not None:
                places.append(found)
                self._count(self.shared, kind)
            elif full is not None and full in new:
                places.append((None, new[full]))
                self._count(self.shared, kind)
            else:
                places.append((None, len(own)))
                if full is not None:
                    new[full] = len(own)
                    self._count(self.computed, kind)
                own.append(i)
        mine = self._start(scheduler, task, own, new) if own else None
        groups = [g for g in dict.fromkeys([mine, *(g for g, _ in places)]) if g is not None]
        outcomes = await asyncio.gather(*(self._wait(g) for g in groups), return_exceptions=True)
        done = dict(zip(groups, outcomes))
        if mine is not None and isinstance(done[mine], BaseException):
            raise done[mine]
        results: list[Any] = []
        for i, (group, at) in enumerate(places):
            outcome = done[mine if group is None else group]
            if isinstance(outcome, BaseException):
                outcome = await self._alone(scheduler, task, i, group, outcome)
                results.append(copy.deepcopy(outcome))
            else:
                value = outcome[at]
                results.append(value if keys[i] is None else copy.deepcopy(value))
        return results

    async def stream(self, scheduler: EngineScheduler, task: EngineTask) -> AsyncIterator[GenerationChunk]:
        """`task`'s one streamed request, streamed from the engine once per scope: every query
        asking for it gets its chunks from the first, the final generation its own copy. The
        engine request stops (aborted) once no query listens and it has not ended."""
        key = request_key(task.requests[0]) if len(task.requests) == 1 else None
        if key is None:
            async with aclosing(scheduler.stream_unshared(task)) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        kind = str(getattr(scheduler.engine, "kind", scheduler.name))
        full = (scheduler.name, key)
        shared = self.streams.get(full)
        if shared is None:
            shared = self.streams[full] = _Stream()
            shared.job = asyncio.get_running_loop().create_task(self._pump(scheduler, task, shared), name=f"accel-shared-{task.node}")
            self._count(self.computed, kind)
        else:
            self._count(self.shared, kind)
        shared.listeners += 1
        try:
            async for chunk in shared.chunks:
                yield chunk if chunk.generation is None else replace(chunk, generation=copy.deepcopy(chunk.generation))
            if shared.error is not None:
                raise shared.error
        finally:
            shared.listeners -= 1
            if shared.listeners == 0 and not shared.chunks.closed and shared.job is not None:
                shared.job.cancel()  # nobody listens any more: abort the engine request,
                if self.streams.get(full) is shared:  # and a later query streams it anew
                    del self.streams[full]

    @staticmethod
    async def _pump(scheduler: EngineScheduler, task: EngineTask, shared: _Stream) -> None:
        try:
            async with aclosing(scheduler.stream_unshared(task)) as chunks:
                async for chunk in chunks:
                    shared.chunks.emit(chunk)
        except BaseException as err:  # noqa: BLE001 - every listener re-raises it
            shared.error = err
            if isinstance(err, asyncio.CancelledError):
                raise
        finally:
            shared.chunks.close()

    async def _wait(self, group: _Group) -> list[Any]:
        group.waiters += 1
        try:
            return await asyncio.shield(group.job)  # leaving early must not stop others' work
        finally:
            group.waiters -= 1
            if group.waiters == 0 and not group.job.done():
                group.job.cancel()  # nobody waits any more: stop the engine work
                for key in group.keys:
                    if self.entries.get(key, (None,))[0] is group:
                        del self.entries[key]

    async def _alone(self, scheduler: EngineScheduler, task: EngineTask, index: int, group: _Group | None,
                     error: BaseException) -> Any:
        """Request `index` of `task` when the group computing it failed: that failure where the
        request was the group's only one, else the request run alone (shared again under its
        key), so another query's bad request in the group never fails this one."""
        if isinstance(error, asyncio.CancelledError) or group is None or group.size < 2:
            raise error
        key = (scheduler.name, request_key(task.requests[index]))
        found = self.entries.get(key)
        if found is None or found[0] is group or found[0].job.cancelled():
            found = (self._start(scheduler, task, [index], {key: 0}), 0)
        return (await self._wait(found[0]))[found[1]]

    def _start(self, scheduler: EngineScheduler, task: EngineTask, indices: list[int],
               keys: dict[tuple[str, Hashable], int]) -> _Group:
        """Send `task`'s requests at `indices` as one engine task of the scope's, and enter
        `keys` (each with its place among them) as computed by it."""
        sub = _subtask(task, [task.requests[i] for i in indices])
        job = asyncio.get_running_loop().create_task(scheduler.submit_unshared(sub), name=f"accel-shared-{task.node}")
        job.add_done_callback(_retrieve)
        group = _Group(job, list(keys), len(indices))
        for key, at in keys.items():
            self.entries[key] = (group, at)
        return group


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
