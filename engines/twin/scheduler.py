"""A model of vLLM's v1 scheduler, without time: what one step runs and what it yields.

Each step first gives every running request its share of the token budget
(`max_num_batched_tokens`): one token per decoding request, a chunk of the prompt per prefilling
one (chunked prefill); then it admits waiting requests (by arrival, or by `priority` then
arrival) while fewer than `max_num_seqs` run, budget is left and the KV cache has room. An
admitted prompt skips its leading blocks found in the prefix cache (hash chains over
`block_size`-token blocks, least recently used evicted first). The caller times a step with the
profile's cost model and calls `finish` when the simulated time has passed. Not modelled yet:
preemption (a priority request waits for a free slot; the KV cache may overcommit while decoding).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from accel.engines.twin.content import OutputPlan
from accel.engines.twin.profile import LLMConfig


@dataclass(eq=False)
class Seq:
    """One request inside the scheduler."""

    rid: str
    prompt: list[int]
    max_tokens: int
    plan: OutputPlan
    priority: int = 0
    arrival: int = 0
    computed: int = 0
    cached: int = 0
    output: list[int] = field(default_factory=list)
    finished: str | None = None

    @property
    def prefilling(self) -> bool:
        return self.computed < len(self.prompt)


@dataclass(frozen=True)
class Step:
    prefill: tuple[tuple[Seq, int], ...]
    decode: tuple[Seq, ...]
    context_tokens: int
    prefill_pairs: float = 0.0
    """The query-key pairs the prefill chunks attend: a chunk of c tokens after o computed ones
    attends c * (o + c / 2) (causal). Quadratic in a prompt's length: a CPU prefill's cost."""

    @property
    def prefill_tokens(self) -> int:
        return sum(chunk for _, chunk in self.prefill)


@dataclass
class Counters:
    """vLLM's counters, under its metric names without the `vllm:` prefix and `_total`."""

    prompt_tokens: int = 0
    prompt_tokens_cached: int = 0
    generation_tokens: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0})


class Scheduler:
    def __init__(self, config: LLMConfig, *, priority: bool = False) -> None:
        self.config = config
        self.priority = priority
        self.waiting: list[Seq] = []
        self.running: list[Seq] = []
        self.counters = Counters()
        self._cache: OrderedDict[int, None] = OrderedDict()
        self._arrivals = 0

    # ---- requests ----
    def add(self, seq: Seq) -> None:
        if not seq.prompt:
            raise ValueError("a prompt needs at least one token")
        self._arrivals += 1
        seq.arrival = self._arrivals
        self.waiting.append(seq)

    def end(self, seq: Seq, reason: str) -> None:
        """Finish `seq` early (a stop string, the client left: 'abort')."""
        if seq.finished is not None:
            return
        seq.finished = reason
        self.counters.finished[reason] = self.counters.finished.get(reason, 0) + 1
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)

    def reset_prefix_cache(self) -> None:
        self._cache.clear()

    def kv_usage(self) -> float:
        return min(self._blocks_used() / self.config.num_gpu_blocks, 1.0)

    # ---- steps ----
    def plan(self) -> Step | None:
        """The next step's work, or None when nothing runs or waits."""
        budget = self.config.max_num_batched_tokens
        prefill: list[tuple[Seq, int]] = []
        decode: list[Seq] = []
        context = 0
        for seq in self.running:
            if budget == 0:
                break
            if seq.prefilling:
                chunk = min(len(seq.prompt) - seq.computed, budget)
                prefill.append((seq, chunk))
                budget -= chunk
            else:
                decode.append(seq)
                context += len(seq.prompt) + len(seq.output)
                budget -= 1
        order: Callable[[Seq], tuple[int, ...]] = (lambda s: (s.priority, s.arrival)) if self.priority else (lambda s: (s.arrival,))
        for seq in sorted(self.waiting, key=order):
            if budget == 0 or len(self.running) >= self.config.max_num_seqs:
                break
            if self._blocks_used() + self._blocks(len(seq.prompt) + 1) > self.config.num_gpu_blocks:
                break
            self._admit(seq)
            chunk = min(len(seq.prompt) - seq.computed, budget)
            prefill.append((seq, chunk))
            budget -= chunk
        if not prefill and not decode:
            return None
        pairs = sum(chunk * (seq.computed + chunk / 2) for seq, chunk in prefill)
        return Step(tuple(prefill), tuple(decode), context, pairs)

    def finish(self, step: Step) -> list[tuple[Seq, int]]:
        """Apply a step that has run: the tokens it sampled, as (request, token id)."""
        sampled: list[tuple[Seq, int]] = []
        for seq, chunk in step.prefill:
            if seq.finished is not None:
                continue
            seq.computed += chunk
            self._remember(seq.prompt[:seq.computed - seq.computed % self.config.block_size])
            if not seq.prefilling:
                sampled.append((seq, self._sample(seq)))
        for seq in step.decode:
            if seq.finished is None:
                sampled.append((seq, self._sample(seq)))
        return sampled

    # ---- internals ----
    def _sample(self, seq: Seq) -> int:
        token = seq.plan.token(len(seq.output))
        seq.output.append(token)
        self.counters.generation_tokens += 1
        if token == seq.plan.eos_id:
            self.end(seq, "stop")
        elif len(seq.output) >= seq.max_tokens or len(seq.prompt) + len(seq.output) >= self.config.max_model_len:
            self.end(seq, "length")
        return token

    def _admit(self, seq: Seq) -> None:
        size = self.config.block_size
        hits = 0
        for digest in self._hashes(seq.prompt):
            if digest not in self._cache:
                break
            self._cache.move_to_end(digest)
            hits += 1
        cached = min(hits * size, len(seq.prompt) - 1)  # the last prompt token is always computed
        cached -= cached % size
        seq.computed = seq.cached = cached
        counters = self.counters
        counters.prompt_tokens += len(seq.prompt)
        counters.prompt_tokens_cached += cached
        counters.prefix_cache_queries += len(seq.prompt)
        counters.prefix_cache_hits += cached
        self.waiting.remove(seq)
        self.running.append(seq)

    def _hashes(self, tokens: list[int]) -> list[int]:
        size = self.config.block_size
        chain, parent = [], 0
        for at in range(0, len(tokens) - len(tokens) % size, size):
            parent = hash((parent, tuple(tokens[at:at + size])))
            chain.append(parent)
        return chain

    def _remember(self, tokens: list[int]) -> None:
        for digest in self._hashes(tokens):
            self._cache[digest] = None
            self._cache.move_to_end(digest)
        while len(self._cache) > self.config.num_gpu_blocks:
            self._cache.popitem(last=False)

    def _blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.config.block_size)

    def _blocks_used(self) -> int:
        return sum(self._blocks(len(s.prompt) + len(s.output) + 1) for s in self.running)
