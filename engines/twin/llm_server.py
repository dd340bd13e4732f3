"""The LLM twin: vLLM's OpenAI-compatible server over the modelled scheduler.

Routes: `/v1/completions` and `/v1/chat/completions` (streamed as SSE or not, `usage` with
`prompt_tokens_details.cached_tokens`), `/tokenize`, `/v1/models`, `/health`, `/metrics` (vLLM's
names), `/admin/faults`, `/admin/steps` (the modelled steps: where a run's LLM time went).
Prompts are tokenised with the offline model's tokenizer and chat template, as the real server
does, so prompt lengths and prefix-cache hits are real. A request whose client leaves is aborted
and leaves the batch.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from accel.engines.twin.burn import Burner
from accel.engines.twin.content import OutputPlan
from accel.engines.twin.engine import Clock, Sleep, StepRecord, Token, TwinDied, TwinEngine
from accel.engines.twin.faults import Faults, FaultScript
from accel.engines.twin.generation import Generation
from accel.engines.twin.listener import Listener
from accel.engines.twin.profile import TwinProfile
from accel.engines.twin.replay import LLMReplay, replay_route
from accel.engines.twin.scheduler import Seq

log = logging.getLogger("accel.engines.twin.llm_server")

FINGERPRINT = "accel-twin"


class BadRequest(Exception):
    """Answered 400 with vLLM's error shape."""


def _error(message: str, status: int = 400) -> JSONResponse:
    kind = "BadRequestError" if status == 400 else "InternalServerError"
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": status}}, status)


class TwinLLMServer:
    """One twin LLM: its engine, tokenizer, faults and (once started) its listener."""

    def __init__(self, profile: TwinProfile, model_dir: Path, *, served_model_name: str = "tiny",
                 priority: bool = False, sleep: Sleep = asyncio.sleep, clock: Clock | None = None) -> None:
        from transformers import AutoTokenizer

        self.profile = profile
        self.model = served_model_name
        self.model_dir = str(model_dir)  # vLLM's model card names it `root`
        self.priority = priority
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        special = set(self.tokenizer.all_special_ids)
        self.pieces = [("" if i in special else self.tokenizer.decode([i])) for i in range(len(self.tokenizer))]
        self.vocab = [i for i, piece in enumerate(self.pieces)
                      if piece and all(ch.isprintable() or ch in "\n\t" for ch in piece)]  # no half characters
        cores = profile.host_cores
        self.engine = TwinEngine(profile.llm, profile.llm_config, priority=priority, sleep=sleep, clock=clock,
                                 burner=None if cores is None else Burner(cores.llm_threads, "twin llm", cores.llm_cores,
                                                                         cores.llm_spin_share),
                                 idle_spin_s=0.0 if cores is None else cores.idle_spin_s)
        self.engine.on_death = self._died
        self.faults = Faults(self._apply)
        self.listener: Listener | None = None
        self.replay: LLMReplay | None = None
        """Recorded answers (validation check 1 only: engines/twin/replay.py)."""
        self._refusal: asyncio.Task[None] | None = None
        routes = [
            Route("/v1/completions", self._completions, methods=["POST"]),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/tokenize", self._tokenize, methods=["POST"]),
            Route("/detokenize", self._detokenize, methods=["POST"]),
            Route("/reset_prefix_cache", self._reset_prefix_cache, methods=["POST"]),
            Route("/v1/models", self._models),
            Route("/health", lambda _: Response(status_code=200)),
            Route("/metrics", self._metrics),
            Route("/admin/steps", self._steps),
            *self.faults.routes(),
            replay_route(self._load_replay),
        ]
        self.app = self.faults.middleware(Starlette(routes=routes))

    # ---- life ----
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen; returns the base URL (`.../v1` is the OpenAI base)."""
        if self.engine.burner is not None:
            await self.engine.burner.start()
        self.listener = Listener(self.app, host, port)
        await self.listener.start()
        log.info("twin LLM (%s) listening on %s", self.profile.label, self.listener.base_url)
        return self.listener.base_url

    async def close(self) -> None:
        if self._refusal is not None:
            self._refusal.cancel()
        await self.engine.close()
        if self.listener is not None:
            await self.listener.stop()

    def _died(self) -> None:
        if self.listener is not None:
            self.listener.reset_connections()
            if self.listener.accepting:
                self.listener.refuse()

    async def _apply(self, script: FaultScript) -> None:
        engine = self.engine
        engine.slow_factor = script.slow_factor
        generated = engine.scheduler.counters.generation_tokens
        engine.die_after_tokens = None if script.die_after_tokens is None else generated + script.die_after_tokens
        if script.stall_s:
            engine.stall(script.stall_s)
        if self._refusal is not None:
            self._refusal.cancel()
            self._refusal = None
        if self.listener is None:
            return
        if script.refuse or script.refuse_s is not None:
            self.listener.refuse()
            if script.refuse_s is not None:
                self._refusal = asyncio.get_running_loop().create_task(self._reopen(script.refuse_s))
        elif not engine.dead:
            await self.listener.accept()

    async def _reopen(self, seconds: float) -> None:
        await self.engine.sleep(seconds)
        if self.listener is not None and not self.engine.dead:
            await self.listener.accept()

    def _load_replay(self, records: list[dict[str, Any]] | None) -> int:
        def prompt_ids(body: dict[str, Any], chat: bool) -> list[int]:
            try:
                return self._prompt_ids(body, chat)
            except BadRequest:
                return []

        def encode(text: str) -> list[int]:
            return list(self.tokenizer(text, add_special_tokens=False).input_ids)

        self.replay = None if records is None else LLMReplay.load(records, prompt_ids, encode)
        return 0 if self.replay is None else len(self.replay.answers)

    # ---- requests ----
    def _prompt_ids(self, body: dict[str, Any], chat: bool) -> list[int]:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise BadRequest("'messages' must be a non-empty list")
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=body.get("add_generation_prompt", True),
                                                     tokenize=True, **(body.get("chat_template_kwargs") or {}))
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            return list(ids)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt, add_special_tokens=body.get("add_special_tokens", True)).input_ids)
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return prompt
        raise BadRequest("the twin serves one prompt per request (a string or a list of token ids)")

    def _generation(self, body: dict[str, Any], chat: bool) -> Generation:
        for unsupported in ("echo", "logprobs", "top_logprobs", "tools"):
            if body.get(unsupported) not in (None, False, 0, [], "none"):
                raise BadRequest(f"the twin does not model {unsupported!r}")
        if body.get("n", 1) != 1 or (body.get("best_of") or 1) != 1:
            raise BadRequest("the twin serves n=1 (best_of 1)")
        if body.get("priority", 0) and not self.priority:
            raise BadRequest(f"Got priority {body['priority']} but Priority scheduling is not enabled.")
        prompt = self._prompt_ids(body, chat)
        room = self.profile.llm_config.max_model_len - len(prompt)
        if room < 1:
            raise BadRequest(f"This model's maximum context length is {self.profile.llm_config.max_model_len} tokens, "
                             f"your prompt has {len(prompt)}")
        max_tokens = body.get("max_completion_tokens") if chat else None
        max_tokens = max_tokens or body.get("max_tokens") or room
        stops = body.get("stop") or ()
        stops = (stops,) if isinstance(stops, str) else tuple(stops)
        replayed = None if self.replay is None else self.replay.plan(prompt, body, chat, self.tokenizer.eos_token_id)
        plan = replayed or OutputPlan(prompt, body, self.vocab, self.tokenizer.eos_token_id, self.profile.answer_tokens)
        seq = Seq(uuid.uuid4().hex, prompt, min(int(max_tokens), room), plan, priority=int(body.get("priority", 0)))
        return Generation(seq, self.pieces, stops, frozenset(body.get("stop_token_ids") or ()))

    async def _deltas(self, gen: Generation) -> AsyncIterator[str]:
        """The generation's text as it is released; aborts the request if the consumer leaves.
        Tokens the consumer has not taken yet go out together, as vLLM sends them when its
        client lags (its output collector merges deltas): one event for several steps, so a
        twin behind its model does less work per token instead of falling further behind."""
        queue = self.engine.submit(gen.seq)
        try:
            while gen.finish_reason is None:
                died = _absorb_waiting(gen, await queue.get(), queue)
                if delta := gen.release():
                    yield delta
                if died is not None:
                    raise died
        finally:
            self.engine.end(gen.seq, "abort" if gen.finish_reason is None else gen.finish_reason)

    def _usage(self, gen: Generation) -> dict[str, Any]:
        prompt = len(gen.seq.prompt)
        return {"prompt_tokens": prompt, "total_tokens": prompt + len(gen.tokens), "completion_tokens": len(gen.tokens),
                "prompt_tokens_details": {"cached_tokens": gen.seq.cached}}

    async def _completions(self, request: Request) -> Response:
        return await self._serve(request, chat=False)

    async def _chat(self, request: Request) -> Response:
        return await self._serve(request, chat=True)

    async def _serve(self, request: Request, chat: bool) -> Response:
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            gen = self._generation(body, chat)
        except (BadRequest, ValueError, TypeError) as err:
            return _error(str(err))
        if self.engine.dead:
            return _error("the twin is dead", 500)
        rid = ("chatcmpl-" if chat else "cmpl-") + gen.seq.rid[:16]
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion", "created": int(time.time()),
                "model": self.model}
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return _EventStream(self._sse(gen, head, chat, usage))
        return await self._whole(request, gen, head, chat)

    async def _whole(self, request: Request, gen: Generation, head: dict[str, Any], chat: bool) -> Response:
        async def collect() -> str:
            return "".join([delta async for delta in self._deltas(gen)])

        work = asyncio.ensure_future(collect())
        await _until_disconnect(request.receive, work)
        if work.cancelled() or isinstance(work.exception(), TwinDied):
            return Response(status_code=499)  # nobody reads it: the client left, or the twin died
        text = work.result()
        finish = {"finish_reason": gen.finish_reason, "stop_reason": gen.stop_reason}
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, **finish}
            head = {**head, "object": "chat.completion"}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, **finish}
        return JSONResponse({**head, "choices": [choice], "system_fingerprint": FINGERPRINT, "usage": self._usage(gen)})

    async def _sse(self, gen: Generation, head: dict[str, Any], chat: bool, usage: bool) -> AsyncIterator[str]:
        # vLLM's chat stream stamps its fingerprint on the terminal chunk, or with usage
        # requested on the usage chunk instead (langchain-openai reads it from the former)
        stamp = {"system_fingerprint": FINGERPRINT} if chat else {}

        def event(choice: dict[str, Any]) -> str:
            terminal = stamp if choice["finish_reason"] is not None and not usage else {}
            return f"data: {_json({**head, 'choices': [choice], **terminal})}\n\n"

        if chat:
            yield event({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None})
        ended = False
        try:
            async for delta in self._deltas(gen):
                ended = gen.finish_reason is not None  # the last text and the finish reason travel together
                content = {"delta": {"content": delta}} if chat else {"text": delta}
                yield event({"index": 0, **content, "logprobs": None, "finish_reason": gen.finish_reason,
                             **({"stop_reason": gen.stop_reason} if ended else {})})
        except TwinDied:
            log.info("twin died during a stream; its connection was reset")
            return
        if not ended:  # the last token added no text (EOS, a stop token, a stop string)
            content = {"delta": {}} if chat else {"text": ""}
            yield event({"index": 0, **content, "logprobs": None, "finish_reason": gen.finish_reason,
                         "stop_reason": gen.stop_reason})
        if usage:
            yield f"data: {_json({**head, 'choices': [], 'usage': self._usage(gen), **stamp})}\n\n"
        yield "data: [DONE]\n\n"

    # ---- the small routes ----
    async def _tokenize(self, request: Request) -> Response:
        body = json.loads(await request.body())
        try:
            ids = self._prompt_ids(body, chat="messages" in body)
        except BadRequest as err:
            return _error(str(err))
        return JSONResponse({"count": len(ids), "max_model_len": self.profile.llm_config.max_model_len,
                             "tokens": ids, "token_strs": None})

    async def _detokenize(self, request: Request) -> Response:
        tokens = json.loads(await request.body()).get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return _error("'tokens' must be a list of token ids")
        return JSONResponse({"prompt": self.tokenizer.decode(tokens)})

    async def _reset_prefix_cache(self, _: Request) -> Response:
        """vLLM's dev-mode endpoint, which benchmarks call between systems."""
        self.engine.scheduler.reset_prefix_cache()
        return Response(status_code=200)

    async def _steps(self, request: Request) -> Response:
        """`GET /admin/steps?since=T&until=U`: the steps that began in [T, U) on the engine's clock
        (`time.monotonic` on this host), one row each under `fields`, with the profile's floor:
        what a bench needs to say how much of a run's LLM time paid for reading the weights
        under-filled, and how long prefill held decoding sequences (benchmarks/llm_steps.py)."""
        try:
            since = float(request.query_params.get("since", "-inf"))
            until = float(request.query_params.get("until", "inf"))
        except ValueError:
            return _error("'since' and 'until' must be numbers of seconds on the twin's monotonic clock")
        fields = list(StepRecord.__dataclass_fields__)
        rows = [[getattr(r, f) for f in fields] for r in self.engine.step_log if since <= r.at < until]
        return JSONResponse({"clock": "monotonic", "floor_s": self.engine.cost.floor_s, "per_token_s": self.engine.cost.per_token_s,
                             "fields": fields, "steps": rows})

    async def _models(self, _: Request) -> Response:
        card = {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "vllm", "root": self.model_dir,
                "parent": None, "max_model_len": self.profile.llm_config.max_model_len}
        return JSONResponse({"object": "list", "data": [card]})

    async def _metrics(self, _: Request) -> Response:
        sched, counters = self.engine.scheduler, self.engine.scheduler.counters
        labels = f'engine="0",model_name="{self.model}"'
        config = self.profile.llm_config
        lines = [
            f"vllm:num_requests_running{{{labels}}} {float(len(sched.running))}",
            f"vllm:num_requests_waiting{{{labels}}} {float(len(sched.waiting))}",
            f"vllm:kv_cache_usage_perc{{{labels}}} {sched.kv_usage()}",
            f"vllm:prefix_cache_queries_total{{{labels}}} {float(counters.prefix_cache_queries)}",
            f"vllm:prefix_cache_hits_total{{{labels}}} {float(counters.prefix_cache_hits)}",
            f"vllm:prompt_tokens_total{{{labels}}} {float(counters.prompt_tokens)}",
            f"vllm:prompt_tokens_cached_total{{{labels}}} {float(counters.prompt_tokens_cached)}",
            f"vllm:generation_tokens_total{{{labels}}} {float(counters.generation_tokens)}",
            *(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {float(n)}'
              for reason, n in counters.finished.items()),
            f'vllm:cache_config_info{{block_size="{config.block_size}",enable_prefix_caching="True",engine="0",'
            f'num_gpu_blocks="{config.num_gpu_blocks}"}} 1.0',
            f"twin:simulated_seconds_total{{{labels}}} {self.engine.simulated_s}",
            f"twin:lag_seconds_total{{{labels}}} {self.engine.lag_s}",
            f"twin:steps_total{{{labels}}} {float(self.engine.steps)}",
            f"process_cpu_seconds_total {time.process_time()}",  # as prometheus_client's, which vLLM's /metrics has
        ]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")


def _absorb_waiting(gen: Generation, item: Token | TwinDied, queue: asyncio.Queue[Token | TwinDied]) -> TwinDied | None:
    """Absorb `item` and every token already waiting behind it; the death that stopped it, if any."""
    while True:
        if isinstance(item, TwinDied):
            return item
        gen.absorb(item.id, item.finished)
        if gen.finish_reason is not None or queue.empty():
            return None
        item = queue.get_nowait()


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))  # vLLM's compact events


async def _until_disconnect(receive: Receive, work: asyncio.Future[Any]) -> None:
    """Wait for `work`; cancel it if the client goes first (the body is read, so the next
    message from the server is the disconnect)."""
    async def gone() -> None:
        message = await receive()
        while message["type"] != "http.disconnect":
            message = await receive()

    watch = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (work, watch):
            task.cancel()
        await asyncio.gather(work, watch, return_exceptions=True)


class _EventStream(Response):
    """Server-sent events whose producer is cancelled (and so aborts its request) as soon as the
    client disconnects, whatever the ASGI server's spec version."""

    def __init__(self, events: AsyncIterator[str]) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8")]  # chunked: no length
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def pump() -> None:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for event in self.events:
                await send({"type": "http.response.body", "body": event.encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        work = asyncio.ensure_future(pump())
        await _until_disconnect(receive, work)
        await self.events.aclose()  # type: ignore[attr-defined]
        if not work.cancelled() and work.exception() is not None and not isinstance(work.exception(), OSError):
            raise work.exception()  # type: ignore[misc]
