"""What the LLM twin alone allows a workload of dependent calls: its scheduler and step model
run with no wall clock, every call sent the moment its inputs are ready, nothing else costing
time. Not a lower bound (another schedule could do better); a reference that says how much of a
run's distance from its bound is the engine's, whoever drives it. Beside it, `step_floor`: what
no schedule of a batch's calls can beat on the same step model, prefill charged in full.

A query is a chain of levels; a level's calls (prompt tokens, output tokens) go out together
once the level before has finished, plus a fixed delay for the non-LLM work between them
(retrieval, rerank). Given the encoders' devices (`encoders`: the twins' embed and rerank
costs), a chain's encoder stages between levels queue there instead: one call at a time per
device, each taking every input waiting, so 32 queries' rerank pairs take the device's time
one after another, as they do on the twins. A call's prompt is the tokens the engine must
compute: prompts share no prefix here, so a workload's prompts are sized by their uncached
tokens. `cap`: at most that many prompt tokens sent and not yet prefilled, what a client pacing
its requests would do; it is what a smaller `max_num_batched_tokens` does inside vLLM too
(`config`).

    python -m accel.benchmarks.llm_schedule --profile h100-8b
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accel.benchmarks.metrics import percentile
from accel.benchmarks.step_floor import Call, Chain, Stage, step_floor
from accel.benchmarks.workload import poisson_arrivals
from accel.engines.twin.profile import EncoderCost, LLMConfig, LLMCost, TwinProfile, load_profile
from accel.engines.twin.scheduler import Scheduler, Seq

__all__ = ["SHAPES", "Call", "Chain", "Stage", "encoder_devices", "latencies", "makespan_as_sent", "shape_as_sent", "step_floor", "workload"]

ENCODER_MAX_ITEMS = 1024
"""The most inputs one modelled encoder call takes: accel's rerank calls reach 1,024 pairs
(`RERANK_CALL_S`), and past 512 the `h100-8b` curves gain nothing more."""


class _Plan:
    """Output tokens that never end a request early: `max_tokens` ends it."""

    eos_id = None

    def token(self, position: int) -> int:
        return 1


class _Encoder:
    """One encoder device driven as accel's engine scheduler drives it: once free, one call
    takes every input that has arrived (whole queries' stages, up to `max_items` unless a
    single stage is larger), and calls run one after another, like kernels on one GPU stream.
    A call costs what the twin charges (`EncoderCost`: padded to its longest input)."""

    def __init__(self, cost: EncoderCost, max_items: int) -> None:
        self.cost, self.max_items = cost, max_items
        self.free_at = 0.0
        self.queue: list[tuple[float, int, int, int, int]] = []  # (arrived, order, chain, level, stage)
        self._order = 0

    def push(self, arrived: float, chain: int, level: int, stage: int) -> None:
        self._order += 1
        heapq.heappush(self.queue, (arrived, self._order, chain, level, stage))

    def next_start(self) -> float | None:
        return max(self.free_at, self.queue[0][0]) if self.queue else None

    def call(self, chains: Sequence[Chain]) -> tuple[float, list[tuple[int, int, int]]]:
        """Run the next call: when it ends, and the (chain, level, stage) demands it served."""
        start = self.next_start()
        assert start is not None
        taken: list[tuple[int, int, int]] = []
        lengths: list[int] = []
        while self.queue and self.queue[0][0] <= start:
            _, _, chain, level, index = self.queue[0]
            stage = chains[chain].stages_after(level)[index]
            if taken and len(lengths) + stage.items > self.max_items:
                break
            heapq.heappop(self.queue)
            taken.append((chain, level, index))
            lengths.extend([stage.tokens] * stage.items)
        self.free_at = start + self.cost.cost_of(lengths)
        return self.free_at, taken


def encoder_devices(profile: TwinProfile) -> dict[str, EncoderCost]:
    """A twin profile's encoder devices, by the names the shapes' stages use."""
    return {"embed": profile.embed, "rerank": profile.rerank}


def latencies(chains: Sequence[Chain], arrivals: Sequence[float], cost: LLMCost, config: LLMConfig,
              cap: int | None = None, encoders: Mapping[str, EncoderCost] | None = None,
              max_items: int = ENCODER_MAX_ITEMS) -> list[float]:
    """Each chain's latency from its arrival, with every call sent as soon as its level is ready
    (or, with `cap`, once the prompt tokens in flight and not yet prefilled leave room). The
    chains' encoder stages cost nothing unless `encoders` models their devices (`_Encoder`)."""
    scheduler = Scheduler(config)
    devices = {name: _Encoder(device, max_items) for name, device in (encoders or {}).items()}
    ready: list[tuple[float, int, int]] = []
    outstanding: dict[int, int] = {}
    waiting: list[tuple[float, int, int, Call]] = []
    unprefilled: dict[Seq, int] = {}
    owner: dict[Seq, tuple[int, int]] = {}
    done: dict[int, float] = {}
    now, ids = 0.0, 0

    def after(at: float, chain: int, level: int, stage: int) -> None:
        """Chain `chain` has finished level `level` (-1: arrived) and its first `stage` encoder
        stages after it at `at`."""
        if level + 1 == len(chains[chain].levels):
            done[chain] = at
            return
        stages = chains[chain].stages_after(level) if devices else ()
        if stage < len(stages):
            devices[stages[stage].device].push(at, chain, level, stage)
        else:
            heapq.heappush(ready, (at, chain, level + 1))

    for chain, at in enumerate(arrivals):  # a chain's first level goes once its encoder calls before it have run
        after(at, chain, -1, 0)

    def run_encoders(until: float) -> None:
        """Every encoder call that starts by `until`, in start order."""
        while True:
            starts = [(start, name) for name, device in devices.items() if (start := device.next_start()) is not None]
            start, name = min(starts, default=(None, None))
            if start is None or start > until:
                return
            ended, served = devices[name].call(chains)
            for chain, level, stage in served:
                after(ended, chain, level, stage + 1)

    while ready or waiting or scheduler.running or scheduler.waiting or any(d.queue for d in devices.values()):
        run_encoders(now)
        while ready and ready[0][0] <= now:
            at, chain, level = heapq.heappop(ready)
            calls = chains[chain].levels[level]
            outstanding[chain] = len(calls)
            waiting.extend((at, chain, level, call) for call in calls)
        waiting.sort()
        held = []
        for at, chain, level, (prompt, out) in waiting:
            pending = sum(unprefilled.values())
            if cap is not None and pending and pending + prompt > cap:
                held.append((at, chain, level, (prompt, out)))
                continue
            ids += 1
            seq = Seq(str(ids), list(range(ids * 100_000, ids * 100_000 + prompt)), out, _Plan())  # type: ignore[arg-type]
            scheduler.add(seq)
            unprefilled[seq], owner[seq] = prompt, (chain, level)
        waiting = held
        step = scheduler.plan()
        if step is None:  # idle until the next level is ready or the next encoder call starts
            upcoming = [ready[0][0]] if ready else []
            upcoming += [start for device in devices.values() if (start := device.next_start()) is not None]
            if not upcoming:  # requests wait that the scheduler cannot admit: more than its KV cache holds
                raise RuntimeError("llm_schedule: the twin's scheduler admits none of the waiting requests "
                                   "(their prompts exceed its KV cache); use shorter prompts or fewer queries")
            now = max(now, min(upcoming))
            continue
        now += cost.step_s(step.prefill_tokens, len(step.prefill), len(step.decode), step.context_tokens,
                           step.prefill_pairs)
        for seq, _ in scheduler.finish(step):
            unprefilled.pop(seq, None)
            if seq.finished is None:
                continue
            chain, level = owner.pop(seq)
            outstanding[chain] -= 1
            if not outstanding[chain]:
                last = level + 1 == len(chains[chain].levels)
                after(now if last else now + chains[chain].delay(level), chain, level, 0)
    return [done[chain] - arrivals[chain] for chain in range(len(chains))]


def makespan_as_sent(chains: Sequence[Chain], cost: LLMCost, config: LLMConfig,
                     encoders: Mapping[str, EncoderCost] | None = None) -> float:
    """A batch's makespan on the LLM alone (with `encoders`, the chains' encoder stages queued
    on those devices), every chain starting at once and every call sent when its level is ready."""
    return max(latencies(chains, [0.0] * len(chains), cost, config, encoders=encoders))


# The goal workloads' shapes on the twins: prompt tokens per call from their reports (the
# queries' `prompt_tokens` over their calls: 657 a query for advanced RAG LangChain, 1,192
# LlamaIndex, 530 research graph, 491 multi-agent, 1,079 map-reduce-lcel, 2,997 a chat
# conversation), less the share the prefix cache served (`cached_fraction`: the templates'
# heads, a conversation's history), answers ended where the twin ends them (`answer_tokens`
# 8-96) or at the examples' `max_tokens` of 32, and the non-LLM steps of a lone query (the
# reports' `lone_queries.steps_s`) after the first level. Queries: the goals' batch sizes.
# The advanced RAGs' encoder stages after the first level, from accel's requests to the twins
# in a batch of 32 (2026-12-04, `h100-8b`): LangChain sent 995 rerank pairs (31 a query),
# LlamaIndex 895 (28), whose calls took what the twin's curve charges pairs padded to about
# 190 and 480 tokens (LlamaIndex's chunks are longer); the expanded queries' embeddings, 2 and
# 3 a query, are short.
@dataclass(frozen=True)
class Shape:
    levels: tuple[tuple[tuple[int, int], ...], ...]
    cached: float
    queries: int = 32
    delay_s: float = 0.0
    rate: float | None = None
    """The Poisson goal's rate (stock's saturation rate in the suite's batch run), where it has one."""
    stages: tuple[Stage, ...] = ()
    """Encoder calls after the first level, where their devices are modelled (`latencies`'s
    `encoders`); `delay_s` then counts only `other_s`."""
    other_s: float = 0.0
    """Of `delay_s`, the steps that are no encoder call (the vector searches)."""


SHAPES = {
    "advanced RAG LangChain": Shape((((60, 80),), ((170, 220),), ((170, 220),), ((170, 220),)), 0.21, delay_s=0.03,
                                    rate=11.69, stages=(Stage("embed", 2, 20), Stage("rerank", 31, 190)),
                                    other_s=0.004),
    "advanced RAG LlamaIndex": Shape((((90, 110),), ((330, 390),), ((330, 390),), ((330, 390),)), 0.15, delay_s=0.03,
                                     rate=11.366, stages=(Stage("embed", 3, 20), Stage("rerank", 28, 480)),
                                     other_s=0.004),
    "research graph": Shape((((35, 50),), ((70, 110),) * 2, ((250, 400),)), 0.19),
    "multi-agent": Shape((((35, 50),), ((70, 110),) * 3, ((150, 220),)), 0.23),
    "map-reduce-lcel": Shape((((90, 110),) * 8, ((250, 350),)), 0.12),
    "chat": Shape((((700, 800),), ((120, 180),), ((800, 900),), ((170, 230),), ((950, 1050),)), 0.23, queries=16),
}


def shape_as_sent(name: str, mode: str, cost: LLMCost, config: LLMConfig, seeds: int = 3,
                  encoders: Mapping[str, EncoderCost] | None = None) -> float | None:
    """The workload shape's makespan (`batch`) or p95 latency at its goal's rate (`poisson`) on
    the LLM alone, every call sent when ready (with `encoders`, its encoder stages queued on
    those devices): the median over `seeds` seeds. None for a shape it does not know, or a
    Poisson mode where the shape has no rate."""
    shape = SHAPES.get(name)
    if shape is None or mode not in ("batch", "poisson") or (mode == "poisson" and shape.rate is None):
        return None
    values = []
    for seed in range(seeds):
        chains = workload(name, seed=seed, encoders=encoders is not None)
        arrivals = [0.0] * len(chains) if mode == "batch" else poisson_arrivals(len(chains), shape.rate, seed)
        sent = latencies(chains, arrivals, cost, config, encoders=encoders)
        values.append(max(sent) if mode == "batch" else percentile(sent, 95))
    return sorted(values)[len(values) // 2]


def workload(name: str, queries: int | None = None, seed: int = 0, max_tokens: int = 32,
             encoders: bool = False) -> list[Chain]:
    """`queries` chains of the workload's shape, each call's prompt its uncached tokens; with
    `encoders`, its encoder stages as stages (modelled on their devices) and only the other
    steps as the delay. The same seed draws the same calls either way."""
    shape, rng = SHAPES[name], random.Random(seed)
    staged = encoders and bool(shape.stages)
    delay = shape.other_s if staged else shape.delay_s
    stages = (shape.stages,) if staged else ()

    def call(prompt: tuple[int, int]) -> Call:
        return max(1, round(rng.randint(*prompt) * (1 - shape.cached))), min(rng.randint(8, 96), max_tokens)

    return [Chain(tuple(tuple(call(prompt) for prompt in level) for level in shape.levels), (delay,), stages)
            for _ in range(queries or shape.queries)]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m accel.benchmarks.llm_schedule", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="h100-8b")
    parser.add_argument("--queries", type=int, help="queries per workload (default: the goal's)")
    parser.add_argument("--rate", type=float, help="Poisson arrivals per second (default: the goal's, where it has one)")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    profile = load_profile(args.profile)
    cost, config = profile.llm, profile.llm_config
    small = dataclasses.replace(config, max_num_batched_tokens=512)
    encoders = encoder_devices(profile)
    print(f"{profile.label}: the LLM twin alone, every call sent when ready (medians of {args.seeds} seeds)")
    print(f"{'workload':<24} {'mode':<8} {'alone s':>8} {'floor s':>8} {'as sent s':>10} {'x alone':>8} {'budget 512':>11} "
          f"{'cap 512':>8} {'+ encoders s':>13}")
    for name, shape in SHAPES.items():
        rate = args.rate or shape.rate
        for mode in ("batch", "poisson") if rate else ("batch",):
            rows = []
            for seed in range(args.seeds):
                chains = workload(name, args.queries, seed=seed)
                arrivals = [0.0] * len(chains) if mode == "batch" else poisson_arrivals(len(chains), rate, seed)
                alone = [latencies([c], [0.0], cost, config)[0] for c in chains]
                stat = max if mode == "batch" else (lambda values: percentile(values, 95))
                sent = stat(latencies(chains, arrivals, cost, config))
                floor = max(stat(alone), step_floor(chains, cost, config)) if mode == "batch" else None
                staged = (stat(latencies(workload(name, args.queries, seed=seed, encoders=True), arrivals, cost, config,
                                         encoders=encoders)) if shape.stages else None)
                rows.append((stat(alone), floor, sent, stat(latencies(chains, arrivals, cost, small)),
                             stat(latencies(chains, arrivals, cost, config, cap=512)), staged))
            alone_s, floor_s, sent_s, budget_s, cap_s, staged_s = (None if None in col else sorted(col)[len(col) // 2]
                                                                   for col in zip(*rows))
            floor_text = "n/a" if floor_s is None else f"{floor_s:.3f}"
            staged_text = "-" if staged_s is None else f"{staged_s:.3f}"
            print(f"{name:<24} {mode:<8} {alone_s:>8.3f} {floor_text:>8} {sent_s:>10.3f} {sent_s / alone_s:>7.2f}x "
                  f"{budget_s:>11.3f} {cap_s:>8.3f} {staged_text:>13}")
    print("batch: makespan against the longest query alone; poisson: p95 latency against the lone queries' p95.")
    print("floor: no schedule of a batch's calls ends sooner on this step model (`step_floor`), nor before its "
          "longest query alone.")
    print("+ encoders: as sent, with the encoder stages queued on the twins' embed and rerank devices, each call "
          "taking every input waiting (- : a shape without encoder stages).")


if __name__ == "__main__":
    main()
