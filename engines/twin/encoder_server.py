"""Encoder twins: an embedding server (`POST /v1/embeddings`, OpenAI shape) and a rerank server
(`/rerank` in the Cohere/Jina shape and `/score`, as vLLM's pooling runner serves them).

A call costs the profile's host time per call plus the device part of its length class (inputs
counted with the MiniLM tokenizer; padded to the call's longest, or at their mean where the
profile's encoders pack inputs as vLLM's pooling runner does), and the calls of one server run
one after another, like kernels on one GPU stream. Vectors and scores come from
`twin.content`: deterministic from the text, so equal requests get equal answers.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import functools
import json
import logging
import struct
import time
import uuid
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from accel.engines.encoder_servers import EMBED, RERANK
from accel.engines.twin.burn import Burner
from accel.engines.twin.content import embedding, score
from accel.engines.twin.engine import Clock, Sleep
from accel.engines.twin.faults import Faults, FaultScript
from accel.engines.twin.listener import Listener
from accel.engines.twin.profile import EncoderCost, TwinProfile
from accel.engines.twin.replay import EncoderReplay, replay_route

log = logging.getLogger("accel.engines.twin.encoder_server")

DIMENSIONS = 384
"""MiniLM-L6's embedding width."""
MAX_MODEL_LEN = {"embed": EMBED.max_model_len, "rerank": RERANK.max_model_len}
"""What `accel up --encoders server` starts the real pooling servers with: a longer input is a
400 there, so it is one here."""


TEXT_COUNTS_KEPT = 4096
"""Texts whose token counts an encoder twin remembers (a corpus's passages, recent queries)."""
CALLS_KEPT = 65536
"""Calls an encoder twin's log holds (`GET /admin/calls`), the oldest dropped first."""


class Device:
    """One GPU stream: each call waits for the calls before it, then for its own time. A call
    is timed from when it arrived (or the previous call's modelled end), so the twin's own work
    on it (tokens, vectors) counts inside the modelled time instead of adding to it. With a
    `burner` (an encoder on the host's cores) a call burns its time on them instead."""

    def __init__(self, sleep: Sleep, clock: Clock | None = None, burner: Burner | None = None,
                 idle_spin_s: float = 0.0, serial_s: float = 0.0) -> None:
        self.sleep = sleep
        self.clock = clock or time.monotonic
        self.burner = burner
        """Set for an encoder on the host's cores: a call burns its time there instead of sleeping."""
        self.idle_spin_s = idle_spin_s
        self.serial_s = serial_s
        """The part of a call burned on one thread (the profile's `host_s`: request handling)."""
        self.slow_factor = 1.0
        self.simulated_s = 0.0
        self.absorbed_s = 0.0
        """Of `simulated_s`, the twin's own handling of calls, counted inside their host part."""
        self.lag_s = 0.0
        """Wall time the device fell behind its model, as the LLM twin's: how much later than
        modelled its calls were answered, each slip counted once (not every call's lateness)."""
        self.calls = 0
        self._late = 0.0  # how late the last call reached its modelled end (without a burner)
        self._stall_s = 0.0
        self._free_at = 0.0
        self._tail: asyncio.Future[None] | None = None

    def stall(self, seconds: float) -> None:
        self._stall_s += seconds

    async def drain(self) -> None:
        """Return once every call queued so far has run (a stalled one included)."""
        if self._tail is not None:
            await asyncio.shield(self._tail)

    async def run(self, seconds: float, arrived: float | None = None) -> None:
        """Occupy the device for `seconds` of modelled time, counted from `arrived`."""
        before, done = self._tail, asyncio.get_running_loop().create_future()
        self._tail = done
        arrived = self.clock() if arrived is None else arrived
        try:
            if before is not None:
                await asyncio.shield(before)
            stall, self._stall_s = self._stall_s, 0.0
            took = stall + seconds * self.slow_factor
            if self.burner is not None:  # on the host's cores: the call's time stretches as they are shared
                # the measured host part holds the real server's handling of the request; the
                # twin's own (parsing, tokens, vectors) since it arrived or got the device counts in it
                own = self.clock() - max(arrived, self._free_at)
                await self.sleep(stall)
                serial = min(self.serial_s * self.slow_factor, took - stall)
                self.absorbed_s += min(max(own, 0.0), serial)
                self.lag_s += max(own - serial, 0.0)  # its own work outran the modelled host part
                await self.burner.work(serial - own, threads=1)  # the server's handling of the call: one thread
                await self.burner.work(took - stall - serial)  # the model's compute: every thread
                self._free_at = self.clock()
                if self._tail is done:  # nothing queued behind it: the worker spins, then sleeps
                    self.burner.idle(self.idle_spin_s)
            else:
                queued = self._free_at > arrived  # it starts at the previous call's modelled end
                self._free_at = max(arrived, self._free_at) + took
                now = self.clock()
                late = max(now - self._free_at, 0.0)
                # the schedule's slip, once: a queued call late by what the one before it was
                # late adds nothing, so a burst of calls each later than the last adds its latest
                self.lag_s += max(late - self._late, 0.0) if queued else late
                self._late = late
                await self.sleep(max(self._free_at - now, 0.0))
            self.simulated_s += took
            self.calls += 1
        finally:
            if before is None or before.done():
                done.set_result(None)
            else:  # cancelled while queued: the stream stays in order
                before.add_done_callback(lambda _: done.set_result(None))


def _error(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}}, status)


class TwinEncoderServer:
    """An embedding (`kind="embed"`) or rerank (`kind="rerank"`) twin."""

    def __init__(self, profile: TwinProfile, kind: Literal["embed", "rerank"], *, served_model_name: str | None = None,
                 sleep: Sleep = asyncio.sleep, clock: Clock | None = None) -> None:
        from tokenizers import Tokenizer

        from accel.engines.embeddings import packaged_minilm_path

        self.kind = kind
        self.profile = profile
        self.cost: EncoderCost = profile.embed if kind == "embed" else profile.rerank
        self.model = served_model_name or ("sentence-transformers/all-MiniLM-L6-v2" if kind == "embed" else "reranker")
        self.tokenizer = Tokenizer.from_file(str(packaged_minilm_path() / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()  # the file cuts at 128; lengths must be whole to refuse as vLLM does
        processor = self.tokenizer.post_processor
        self._specials = {pair: 0 if processor is None else processor.num_special_tokens_to_add(pair) for pair in (False, True)}
        self._text_tokens = functools.lru_cache(maxsize=TEXT_COUNTS_KEPT)(self._count_tokens)
        self.max_model_len = MAX_MODEL_LEN[kind]
        cores = profile.host_cores
        burner = None if cores is None else Burner(
            cores.embed_threads if kind == "embed" else cores.rerank_threads, f"twin {kind}", cores.encoder_cores,
            cores.embed_spin_share if kind == "embed" else cores.rerank_spin_share)
        self.device = Device(sleep, clock, burner,
                             0.0 if cores is None else cores.idle_spin_s, self.cost.host_s)
        self.faults = Faults(self._apply)
        self.listener: Listener | None = None
        self.replay = EncoderReplay()
        """Recorded vectors and scores (validation check 1 only: engines/twin/replay.py)."""
        self._refusal: asyncio.Task[None] | None = None
        self.call_log: collections.deque[tuple[float, int, float]] = collections.deque(maxlen=CALLS_KEPT)
        """(arrived on the device's clock, inputs, the token count charged per input) of each call."""
        routes = [Route("/v1/models", self._models), Route("/health", lambda _: Response(status_code=200)),
                  Route("/metrics", self._metrics), Route("/admin/calls", self._calls), *self.faults.routes(),
                  replay_route(self._load_replay)]
        if kind == "embed":
            routes.append(Route("/v1/embeddings", self._embeddings, methods=["POST"]))
        else:
            routes += [Route(path, self._rerank, methods=["POST"]) for path in ("/rerank", "/v1/rerank", "/v2/rerank")]
            routes += [Route(path, self._score, methods=["POST"]) for path in ("/score", "/v1/score")]
        self.app = self.faults.middleware(Starlette(routes=routes))

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        if self.device.burner is not None:
            await self.device.burner.start()
        self.listener = Listener(self.app, host, port)
        await self.listener.start()
        log.info("twin %s (%s) listening on %s", self.kind, self.profile.label, self.listener.base_url)
        return self.listener.base_url

    async def close(self) -> None:
        if self._refusal is not None:
            self._refusal.cancel()
        if self.listener is not None:
            await self.listener.stop()
        if self.device.burner is not None:
            await self.device.burner.close()

    async def _apply(self, script: FaultScript) -> None:
        if script.die_after_tokens is not None:
            raise ValueError("die_after_tokens is an LLM twin's fault (an encoder generates no tokens)")
        self.device.slow_factor = script.slow_factor
        if script.stall_s:
            self.device.stall(script.stall_s)
        if self._refusal is not None:
            self._refusal.cancel()
            self._refusal = None
        if self.listener is None:
            return
        if script.refuse or script.refuse_s is not None:
            self.listener.refuse()
            if script.refuse_s is not None:
                self._refusal = asyncio.get_running_loop().create_task(self._reopen(script.refuse_s))
        else:
            await self.listener.accept()

    async def _reopen(self, seconds: float) -> None:
        await self.device.sleep(seconds)
        if self.listener is not None:
            await self.listener.accept()

    def _load_replay(self, records: list[dict[str, Any]] | None) -> int:
        self.replay = EncoderReplay.load(records or ())
        return len(self.replay.vectors) + len(self.replay.scores)

    def _vector(self, text: str, dimensions: int) -> list[float]:
        recorded = self.replay.vectors.get(text)
        return recorded if recorded is not None and len(recorded) == dimensions else embedding(text, dimensions)

    # ---- the API ----
    def _lengths(self, texts: list[str] | list[tuple[str, str]]) -> list[int]:
        """Token counts of texts or (query, passage) pairs: each text's own count (remembered:
        queries and passages recur across calls) plus the special tokens the tokenizer's
        template adds. Encoding every pair whole cost 0.8 ms a 300-token pair, half the twins'
        CPU under a stock LlamaIndex batch, more than the H100's host time for the call, so
        the twin lagged behind the device it models. One `encode` per new text:
        `encode_batch` wakes the tokenizer's thread pool, which on a busy machine took longer
        than a small call's modelled host time (tests/engines/twin/test_burn.py)."""
        count = self._text_tokens
        return [count(text) + self._specials[False] if isinstance(text, str)
                else count(text[0]) + count(text[1]) + self._specials[True] for text in texts]

    def _count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def _fit(self, lengths: list[int], body: dict[str, Any]) -> list[int] | Response:
        """The lengths the server computes, or vLLM's answer to an input over `max_model_len`
        (renderers/params.py: a 400) unless the request asks to cut it (`truncate_prompt_tokens`,
        as accel's and LangChain's embedding clients send it; -1: at `max_model_len`)."""
        cut = body.get("truncate_prompt_tokens")
        if isinstance(cut, int) and not isinstance(cut, bool) and cut != 0:
            limit = self.max_model_len if cut < 0 else min(cut, self.max_model_len)
            return [min(n, limit) for n in lengths]
        longest = max(lengths, default=0)
        if longest <= self.max_model_len:
            return lengths
        return _error(f"This model's maximum context length is {self.max_model_len} tokens. However, your prompt "
                      f"contains {longest} input tokens, which exceeds this limit even without any output tokens. "
                      f"Please reduce the length of the input prompt.")

    async def _call(self, lengths: list[int], arrived: float) -> None:
        charged = max(lengths) if self.cost.padded else sum(lengths) / len(lengths)
        self.call_log.append((arrived, len(lengths), charged))
        await self.device.run(self.cost.cost_of(lengths), arrived)

    async def _calls(self, request: Request) -> Response:
        """`GET /admin/calls?since=T`: the calls that arrived at or after T (the device's clock,
        `time.monotonic` on this host), each with its inputs and the tokens charged per input
        (padded to the longest, or the mean): what a bench needs to replay a run's encoder work
        on the modelled device (benchmarks/twin_run.py)."""
        try:
            since = float(request.query_params.get("since", "-inf"))
        except ValueError:
            return _error("'since' must be a number of seconds on the twin's monotonic clock")
        calls = [{"at": at, "items": items, "tokens": tokens} for at, items, tokens in self.call_log if at >= since]
        return JSONResponse({"clock": "monotonic", "calls": calls})

    def _head(self, prefix: str) -> dict[str, Any]:
        return {"id": f"{prefix}-{uuid.uuid4().hex[:16]}", "object": "list", "created": int(time.time()), "model": self.model}

    async def _embeddings(self, request: Request) -> Response:
        arrived = self.device.clock()
        body = json.loads(await request.body())
        texts = _texts(body.get("input"), self.tokenizer)
        if texts is None:
            return _error("'input' must be a string, a list of strings, or token ids")
        dimensions = int(body.get("dimensions") or DIMENSIONS)
        if isinstance(lengths := self._fit(self._lengths(texts), body), Response):
            return lengths  # too long: vLLM's 400
        encode = body.get("encoding_format", "float") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = self._vector(text, dimensions)
            value: Any = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode() if encode else vector
            data.append({"index": index, "object": "embedding", "embedding": value})
        await self._call(lengths, arrived)
        usage = {"prompt_tokens": sum(lengths), "total_tokens": sum(lengths), "completion_tokens": 0}
        return JSONResponse({**self._head("embd"), "data": data, "usage": usage})

    async def _rerank(self, request: Request) -> Response:
        arrived = self.device.clock()
        body = json.loads(await request.body())
        query, documents = body.get("query"), body.get("documents")
        documents = [d.get("text") if isinstance(d, dict) else d for d in (documents or [])]
        if not isinstance(query, str) or not documents or not all(isinstance(d, str) for d in documents):
            return _error("rerank needs a string 'query' and a non-empty list of 'documents'")
        if isinstance(lengths := self._fit(self._lengths([(query, d) for d in documents]), body), Response):
            return lengths  # too long: vLLM's 400
        results = sorted(({"index": i, "document": {"text": d}, "relevance_score": self.replay.score(query, d, score)}
                          for i, d in enumerate(documents)), key=lambda r: -r["relevance_score"])
        await self._call(lengths, arrived)
        top_n = int(body.get("top_n") or 0)
        head = self._head("rerank")
        del head["object"], head["created"]
        return JSONResponse({**head, "usage": {"prompt_tokens": sum(lengths), "total_tokens": sum(lengths)},
                             "results": results[:top_n] if top_n else results})

    async def _score(self, request: Request) -> Response:
        arrived = self.device.clock()
        body = json.loads(await request.body())
        for first, second in (("text_1", "text_2"), ("queries", "documents"), ("queries", "items"), ("data_1", "data_2")):
            if first in body and second in body:
                left, right = body[first], body[second]
                break
        else:
            return _error("score needs text_1 and text_2 (or queries and documents)")
        left = [left] if isinstance(left, str) else left
        right = [right] if isinstance(right, str) else right
        if len(left) == 1:
            left = left * len(right)
        if len(left) != len(right) or not right:
            return _error("text_1 must hold one text or as many as text_2")
        if isinstance(lengths := self._fit(self._lengths(list(zip(left, right, strict=True))), body), Response):
            return lengths  # too long: vLLM's 400
        data = [{"index": i, "object": "score", "score": self.replay.score(q, d, score)}
                for i, (q, d) in enumerate(zip(left, right, strict=True))]
        await self._call(lengths, arrived)
        return JSONResponse({**self._head("score"), "data": data,
                             "usage": {"prompt_tokens": sum(lengths), "total_tokens": sum(lengths), "completion_tokens": 0}})

    async def _models(self, _: Request) -> Response:
        card = {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "vllm", "root": self.model,
                "parent": None, "max_model_len": self.max_model_len}
        return JSONResponse({"object": "list", "data": [card]})

    async def _metrics(self, _: Request) -> Response:
        labels = f'model_name="{self.model}"'
        return PlainTextResponse(f"twin:calls_total{{{labels}}} {float(self.device.calls)}\n"
                                 f"twin:simulated_seconds_total{{{labels}}} {self.device.simulated_s}\n"
                                 f"twin:lag_seconds_total{{{labels}}} {self.device.lag_s}\n"
                                 f"process_cpu_seconds_total {time.process_time()}\n")


def _texts(value: Any, tokenizer: Any) -> list[str] | None:
    """The inputs as texts (token ids decoded with the tokenizer they came from)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return [tokenizer.decode(value)]
    if isinstance(value, list) and value and all(isinstance(v, list) and all(isinstance(t, int) for t in v) for v in value):
        return [tokenizer.decode(ids) for ids in value]
    return None
