"""Build a small Llama-architecture model offline, so vLLM has something real to serve.

There is no model hub here and no causal LM ships on PyPI. A byte-level BPE tokenizer trained
on the pydoc corpus plus a seeded random `LlamaForCausalLM` loads in vLLM and transformers
exactly like a downloaded model: its text is gibberish, its prefill/decode cost is real.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from accel.config import settings
from accel.engines.errors import ModelNotFound
from accel.engines.offline.corpus import stdlib_docs

LLMSize = Literal["tiny", "bench"]
STAMP = "accel-build.json"
BUILDER_VERSION = 1

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@dataclass(frozen=True)
class LLMSpec:
    """Everything that determines the built directory; stored in the stamp file."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    seed: int = 0
    builder_version: int = BUILDER_VERSION


SPECS: dict[str, LLMSpec] = {
    # ~4.2M parameters: fast enough to start and run in unit tests.
    "tiny": LLMSpec(4096, 256, 688, 4, 4, 4, 2048, tie_word_embeddings=True),
    # ~53M parameters: LLM time is a major share of a RAG query's time on this CPU.
    "bench": LLMSpec(8192, 768, 1536, 8, 12, 4, 4096, tie_word_embeddings=False),
}


def default_llm_dir(size: LLMSize) -> Path:
    return settings().models_dir / f"llm-{size}"


def build_llm(size: LLMSize, out_dir: Path | None = None, *, force: bool = False) -> Path:
    """Build (or reuse) the offline model directory for `size` and return its path.

    Idempotent: a stamp file records the spec; the directory is rebuilt only when it is missing,
    its stamp differs, or `force`. Built in a temporary sibling and renamed into place, so a
    crash never leaves a half-written model behind.
    """
    if size not in SPECS:
        raise ModelNotFound("offline-llm", f"unknown size {size!r}", f"use one of {sorted(SPECS)}")
    spec = SPECS[size]
    out = Path(out_dir) if out_dir is not None else default_llm_dir(size)
    out.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(out.parent / f".{out.name}.lock"):
        if not force and _stamp(out) == asdict(spec):
            return out
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-", dir=out.parent))
        staging.chmod(0o755)
        try:
            _write_model(spec, staging)
            _replace_dir(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out


def resolve_llm(spec: str | None, size: LLMSize = "bench") -> str:
    """Turn a model spec into what vLLM's `model=` accepts.

    None builds/returns the offline model; an existing path is used as is; a path-like spec
    that does not exist is an error (a typo must not fall through to a hub lookup); anything
    else is a Hugging Face name, left for vLLM to resolve from its local cache.
    """
    if spec is None:
        return str(build_llm(size))
    path = Path(spec).expanduser()
    if path.exists():
        return str(path)
    if _looks_like_path(spec):
        raise ModelNotFound(
            "llm",
            f"model directory {spec!r} does not exist",
            "build one with `python -m accel.engines.offline build-llm --size tiny|bench` "
            "or set ACCEL_LLM_MODEL to an existing model directory",
        )
    return spec


def serving_dtype(model: str) -> str:
    """The dtype vLLM should serve `model` in: float32 for accel's offline builds, "auto" else.

    vLLM's "auto" downcasts float32 checkpoints to bfloat16 on CPU; for the offline models that
    costs batch invariance (greedy outputs then change with batch composition, which breaks
    stock-vs-accel equality checks) and, on CPUs without bf16 units, speed.
    """
    return "float32" if _stamp(Path(model).expanduser()) is not None else "auto"


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~", ".")) or spec.count("/") > 1 or spec.endswith("/")


def _stamp(out: Path) -> dict | None:
    try:
        return json.loads((out / STAMP).read_text())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _exclusive(lock_path: Path):
    """Serialise builders of the same directory across processes (blocks, no polling)."""
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _replace_dir(staging: Path, out: Path) -> None:
    if out.exists():
        retired = out.with_name(f".{out.name}.old")
        shutil.rmtree(retired, ignore_errors=True)
        out.rename(retired)
        staging.rename(out)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        staging.rename(out)


def _write_model(spec: LLMSpec, directory: Path) -> None:
    tokenizer = _train_tokenizer(spec.vocab_size, spec.max_position_embeddings)
    tokenizer.save_pretrained(directory)
    _random_llama(spec, tokenizer).save_pretrained(directory)
    (directory / STAMP).write_text(json.dumps(asdict(spec), indent=2, sort_keys=True))


def _train_tokenizer(vocab_size: int, max_length: int):
    """Byte-level BPE on the pydoc corpus; BOS is prepended to plain prompts, as in Llama."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS, EOS, PAD, *ROLE_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((doc.text for doc in stdlib_docs()), trainer=trainer)
    bos_id = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        chat_template=CHAT_TEMPLATE,
        model_max_length=max_length,
        clean_up_tokenization_spaces=False,
    )


def _random_llama(spec: LLMSpec, tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )
    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        return LlamaForCausalLM(config).eval()
