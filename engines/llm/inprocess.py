"""vLLM in this process: `AsyncLLM` with its engine core in a worker process.

The model runs in vLLM's own process, so the asyncio loop only routes requests and outputs.
Prompts are rendered and tokenized by vLLM's own renderer (its thread pool), which makes the
token ids, the prompt-length check and prefix-cache hits exactly those vLLM would see.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.exceptions import VLLMClientError
from vllm.renderers.params import ChatParams, TokenizeParams
from vllm.sampling_params import RequestOutputKind
from vllm.sampling_params import SamplingParams as VLLMSamplingParams
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.exceptions import EngineDeadError

from accel.config import settings
from accel.engines.base import Generation, GenerationChunk, GenerationRequest, Health, LLMEngine, SamplingParams
from accel.engines.errors import EngineDied, EngineUnavailable, InvalidRequest, PromptTooLong
from accel.engines.llm.load import EngineLoad, LoadRecorder
from accel.engines.offline.llm import resolve_llm, serving_dtype

_CHAT = ChatParams(
    chat_template_kwargs={"add_generation_prompt": True, "continue_final_message": False, "tokenize": False}
)
# Keys of `SamplingParams.extra` forwarded to vLLM; anything else is a caller error.
_EXTRA_KEYS = frozenset(
    {"top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "ignore_eos",
     "min_tokens", "stop_token_ids", "logit_bias", "skip_special_tokens", "n"}
)


def to_vllm_params(params: SamplingParams, *, engine: str = "vllm") -> VLLMSamplingParams:
    """accel's sampling parameters, field for field, as vLLM's (streamed as deltas)."""
    unknown = set(params.extra) - _EXTRA_KEYS
    if unknown:
        raise InvalidRequest(engine, f"unsupported sampling parameters {sorted(unknown)}",
                             f"use only {sorted(_EXTRA_KEYS)} in SamplingParams.extra")
    if params.extra.get("n", 1) != 1:
        raise InvalidRequest(engine, "n > 1 is not supported", "send n separate requests")
    extra = {k: v for k, v in params.extra.items() if k != "n"}
    return VLLMSamplingParams(
        temperature=params.temperature,
        top_p=params.top_p,
        max_tokens=params.max_tokens,
        stop=list(params.stop) or None,
        seed=params.seed,
        output_kind=RequestOutputKind.DELTA,
        **extra,
    )


def check_fits(engine: str, prompt_tokens: int, max_tokens: int, max_model_len: int) -> None:
    """Refuse a prompt that cannot fit with its requested output, before it reaches the engine."""
    if prompt_tokens + max_tokens > max_model_len:
        raise PromptTooLong(
            engine,
            f"prompt of {prompt_tokens} tokens + max_tokens={max_tokens} exceeds the context "
            f"window of {max_model_len} tokens",
            "shorten the prompt (fewer or smaller retrieved chunks), lower max_tokens, "
            "or use a model with a longer context",
        )


class VLLMEngine(LLMEngine):
    """An `LLMEngine` over vLLM's `AsyncLLM`, started and stopped explicitly."""

    name = "vllm"

    def __init__(
        self,
        model: str | None = None,
        *,
        max_model_len: int | None = None,
        max_num_seqs: int = 64,
        dtype: str | None = None,
        seed: int = 0,
        engine_args: Mapping[str, Any] | None = None,
    ) -> None:
        self._model_spec = model
        self._requested_max_len = max_model_len
        self._max_num_seqs = max_num_seqs
        self._dtype = dtype
        self._seed = seed
        self._engine_args = dict(engine_args or {})
        self._engine: AsyncLLM | None = None
        self._recorder: LoadRecorder | None = None
        self._start_lock = asyncio.Lock()
        self.model = model or ""
        self.max_model_len = max_model_len or 0

    # ---- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        async with self._start_lock:
            if self._engine is not None:
                return
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings().kv_cache_gib))
            self.model = await asyncio.to_thread(resolve_llm, self._model_spec, settings().llm_size)
            args = AsyncEngineArgs(
                model=self.model,
                enforce_eager=True,
                enable_prefix_caching=True,
                scheduling_policy="priority",
                max_model_len=self._requested_max_len,
                max_num_seqs=self._max_num_seqs,
                dtype=self._dtype or serving_dtype(self.model),
                seed=self._seed,
                disable_log_stats=False,
                **self._engine_args,
            )
            # Building the engine loads weights and starts the core process: off the loop.
            try:
                engine = await asyncio.to_thread(
                    AsyncLLM.from_engine_args, args, stat_loggers=[self._make_recorder]
                )
            except Exception as err:  # vLLM raises many types here; callers get one typed error
                raise EngineUnavailable(self.name, f"vLLM could not start {self.model}: {type(err).__name__}: {err}",
                                        "check the model directory/name, memory and the vLLM log above") from err
            self._engine = engine
            self.max_model_len = engine.model_config.max_model_len
            self.block_size = engine.vllm_config.cache_config.block_size or self.block_size
        health = await self.health()
        if not health.ok:
            await self.stop()
            raise EngineDied(self.name, f"engine started but failed its first request: {health.detail}",
                             "check the model directory and the vLLM log above")

    async def stop(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            await asyncio.to_thread(engine.shutdown)

    def _make_recorder(self, vllm_config, engine_index: int = 0) -> LoadRecorder:
        self._recorder = LoadRecorder(vllm_config, engine_index)
        return self._recorder

    def load(self) -> EngineLoad:
        """The engine core's queue as of its last step."""
        return self._recorder.latest if self._recorder else EngineLoad()

    async def health(self) -> Health:
        began = time.perf_counter()
        try:
            request = GenerationRequest(prompt="ping", params=SamplingParams(max_tokens=1))
            await self.run([request])
        except Exception as err:  # health reports failures instead of raising them
            return Health(self.name, False, f"{type(err).__name__}: {err}")
        return Health(self.name, True, f"{self.model} generated 1 token", time.perf_counter() - began)

    # ---- requests ----------------------------------------------------------------------------

    async def stream(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        """Deltas as vLLM produces them; the last chunk carries the usage. Cancelling or
        closing the iterator aborts the request inside vLLM."""
        engine = self._require()
        request_id = request.request_id or f"accel-{uuid.uuid4().hex}"
        params = to_vllm_params(request.params, engine=self.name)
        engine_input, prompt_tokens = await self._render(engine, request)
        check_fits(self.name, prompt_tokens, request.params.max_tokens, self.max_model_len)
        outputs = engine.generate(engine_input, params, request_id, priority=request.priority)
        text: list[str] = []
        completion_tokens = 0
        try:
            async for out in outputs:
                piece = out.outputs[0]
                text.append(piece.text)
                completion_tokens += len(piece.token_ids)
                if not out.finished:
                    if piece.text:
                        yield GenerationChunk(delta=piece.text)
                    continue
                if piece.finish_reason == "abort":
                    raise asyncio.CancelledError(f"request {request_id} was aborted")
                yield GenerationChunk(
                    delta=piece.text,
                    finished=True,
                    generation=Generation(
                        text="".join(text),
                        prompt_tokens=prompt_tokens,
                        completion_tokens=completion_tokens,
                        cached_tokens=out.num_cached_tokens or 0,
                        finish_reason=piece.finish_reason,
                        request_id=request_id,
                    ),
                )
        except EngineDeadError as err:
            raise self._died(err) from err
        except VLLMClientError as err:
            raise InvalidRequest(self.name, f"vLLM rejected the request: {err}", "fix the request") from err
        finally:
            await outputs.aclose()

    async def abort(self, request_id: str) -> None:
        await self._require().abort(request_id)

    async def tokenize(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        engine = self._require()
        tok = TokenizeParams(max_total_tokens=None, add_special_tokens=add_special_tokens)
        (rendered,) = await engine.renderer.render_cmpl_async([{"prompt": text}], tok)
        return list(rendered["prompt_token_ids"])

    async def render_chat(self, messages: list[dict[str, str]]) -> str:
        _, prompt = await self._require().renderer.render_messages_async(messages, _CHAT)
        return prompt["prompt"]

    # ---- helpers -----------------------------------------------------------------------------

    async def _render(self, engine: AsyncLLM, request: GenerationRequest) -> tuple[dict, int]:
        """The engine input vLLM would build for this request, and its prompt length."""
        if request.prompt_token_ids is not None:
            prompt: dict[str, Any] = {"prompt_token_ids": list(request.prompt_token_ids)}
            special = False
        elif request.messages is not None:
            prompt = {"prompt": await self.render_chat(request.messages)}
            special = False  # the chat template writes its own BOS
        else:
            prompt = {"prompt": request.prompt}
            special = True
        tok = TokenizeParams(max_total_tokens=None, add_special_tokens=special)
        try:
            (rendered,) = await engine.renderer.render_cmpl_async([prompt], tok)
        except VLLMClientError as err:
            raise InvalidRequest(self.name, f"vLLM could not render the prompt: {err}", "fix the prompt") from err
        return rendered, len(rendered["prompt_token_ids"])

    def _require(self) -> AsyncLLM:
        if self._engine is None:
            raise EngineUnavailable(self.name, "the engine is not started", "call `await engine.start()` first")
        if self._engine.errored:
            raise self._died(EngineDeadError())
        return self._engine

    def _died(self, err: BaseException) -> EngineDied:
        return EngineDied(self.name, f"the vLLM engine core process died ({err})",
                          "stop() this engine and start a new one; check the vLLM log for the cause")
