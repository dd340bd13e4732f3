"""Time MiniLM-shaped encoders on a GPU: what the `h100-8b` twin's encoder curves claim, checked.

Runs on a machine with a CUDA GPU, torch, transformers, tokenizers and sentence-transformers, and
no network (the device machine some sessions are lent). It builds random-weight models of the
shipped encoders' shapes (weights do not change the time), in fp16, and times each call two ways:

- `st`: sentence-transformers end to end (`encode`, `CrossEncoder.predict`), one batch per call,
  as `gpu-h100-engines.json` measured it and the twin's curves are fitted to;
- `lean`: what a serving process does: the Rust tokenizer's `encode_batch` padded to the call's
  longest input, tensors from numpy, one forward, pooling, the result back on the host; the
  tokenising, the GPU time (CUDA events) and the whole call apart.

Shapes: a grid of batch sizes and token lengths, plus the calls a benchmark sent (`--calls`, a
JSON list of {"kind", "items", "tokens"}). Writes one JSON document, rewritten after each part.

    python scripts/gpu_encoder_curves.py --prepare DIR [--call-logs LOG.json ...]   # here
    python3 scripts/gpu_encoder_curves.py --files DIR --out OUT.json [--calls DIR/calls.json]  # there

`--prepare` runs where accel is installed: it copies into DIR the shipped tokenizer, the two
models' configs (`embed-config.json`, `rerank-config.json`) and the embedder's
sentence-transformers files, and turns encoder twins' call logs (`GET /admin/calls`, one JSON
document per file; the file's name must say `embed` or `rerank`) into `calls.json`: the logged
shapes bucketed by inputs and length, the most frequent shape of each bucket standing for it.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

EMBED_GRID = {16: (1, 2, 4, 8, 16, 64, 128, 256, 1024), 64: (1, 2, 4, 8, 16, 64, 128, 256),
              128: (1, 2, 4, 8, 16, 64, 128, 256), 256: (1, 2, 4, 8, 16, 64, 128, 256)}
RERANK_GRID = {64: (1, 2, 4, 8, 16, 40, 128, 512), 128: (1, 2, 4, 8, 16, 40, 128, 512),
               288: (1, 2, 4, 8, 16, 40, 128, 512), 512: (1, 2, 4, 8, 16, 40, 128)}
"""Batch sizes 2 to 8 and embed at 128 since the 2026-12-05 run, whose grid lacked them: from one
input to two or three a call's time jumps, and the straight line from 1 to 16 missed it."""
MAX_LEN = {"embed": 256, "rerank": 512}
OVERLAP = (("rerank", 32, 164), ("rerank", 128, 458), ("embed", 1, 14), ("embed", 128, 28))
QUERY_WORDS = 10
DEVICE, DTYPE = "cuda", torch.float16
"""`--smoke` switches to the CPU in float32 with a tiny grid: a check of the script, no timing."""


def words(tokenizer: Tokenizer) -> list[str]:
    """Whole lower-case words that the tokenizer keeps as one token each."""
    vocab = tokenizer.get_vocab()
    return sorted(w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2 and not w.startswith("["))


def text_of(vocab: list[str], n: int, rng: np.random.Generator) -> str:
    return " ".join(vocab[i] for i in rng.integers(0, len(vocab), max(n, 1)))


def inputs(kind: str, items: int, tokens: int, vocab: list[str], rng: np.random.Generator) -> list:
    """`items` inputs of `tokens` tokens each, special tokens counted (2 for a text, 3 for a pair)."""
    if kind == "embed":
        return [text_of(vocab, tokens - 2, rng) for _ in range(items)]
    query = text_of(vocab, QUERY_WORDS, rng)
    return [(query, text_of(vocab, tokens - 3 - QUERY_WORDS, rng)) for _ in range(items)]


def timed(call, args, budget_s: float = 1.5, reps: int = 15, warm: int = 2) -> dict:
    for _ in range(warm):
        call(args)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    times, parts, start = [], [], time.perf_counter()
    while len(times) < reps and (len(times) < 3 or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        part = call(args)
        times.append(time.perf_counter() - t0)
        if isinstance(part, dict):
            parts.append(part)
    row = {"ms": 1e3 * statistics.median(times), "ms_min": 1e3 * min(times), "n": len(times)}
    for key in parts[0] if parts else ():
        row[key] = 1e3 * statistics.median(p[key] for p in parts)
    return row


class Lean:
    """A serving process's path: tokenize (Rust, padded to the longest), one fp16 forward, pool."""

    def __init__(self, model: torch.nn.Module, tokenizer_file: Path, kind: str) -> None:
        self.model, self.kind = model, kind
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(MAX_LEN[kind])
        self.tokenizer.enable_padding(pad_id=0)
        self.events = DEVICE == "cuda"
        if self.events:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    @torch.inference_mode()
    def __call__(self, batch: list) -> dict:
        t0 = time.perf_counter()
        encoded = self.tokenizer.encode_batch(batch)
        ids = torch.from_numpy(np.array([e.ids for e in encoded], dtype=np.int64))
        mask = torch.from_numpy(np.array([e.attention_mask for e in encoded], dtype=np.int64))
        types = torch.from_numpy(np.array([e.type_ids for e in encoded], dtype=np.int64))
        t1 = time.perf_counter()
        ids, mask, types = (t.to(DEVICE, non_blocking=True) for t in (ids, mask, types))
        if self.events:
            self.start.record()
        if self.kind == "embed":
            hidden = self.model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)
            result = pooled.float()
        else:
            result = self.model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits.float().squeeze(-1)
        if self.events:
            self.end.record()
        result.cpu().numpy()
        t2 = time.perf_counter()
        gpu_s = self.start.elapsed_time(self.end) / 1e3 if self.events else 0.0
        return {"tokenize_ms": t1 - t0, "gpu_ms": gpu_s, "rest_ms": t2 - t1}


def overlap(call, batch: list, calls: int, threads: int) -> float:
    """Seconds for `calls` calls spread over `threads` threads (1: one after another): whether
    one call's tokenising overlaps another's GPU work, as in a server's pipeline."""
    from concurrent.futures import ThreadPoolExecutor

    call(batch)
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: call(batch), range(calls)))
    return time.perf_counter() - start


INPUT_BUCKETS = (1, 8, 24, 40, 96, 192, 384)
LENGTH_BUCKETS = {"embed": (20, 40, 64, 128, 256), "rerank": (128, 200, 300, 400, 512)}


def call_shapes(logs: list[Path]) -> list[dict]:
    """One shape per (kind, inputs bucket, length bucket) of the logged calls, with the count of
    calls it stands for; a pair is at least its query (10 words and 3 special tokens) long."""
    import bisect
    from collections import Counter, defaultdict

    buckets: dict[tuple, Counter] = defaultdict(Counter)
    for log in logs:
        kind = "rerank" if "rerank" in log.name else "embed"
        for call in json.loads(log.read_text())["calls"]:
            items, tokens = int(call["items"]), max(round(call["tokens"]), 3 if kind == "embed" else QUERY_WORDS + 4)
            key = (kind, bisect.bisect_left(INPUT_BUCKETS, items), bisect.bisect_left(LENGTH_BUCKETS[kind], tokens))
            buckets[key][(items, tokens)] += 1
    shapes = []
    for (kind, _, _), counts in sorted(buckets.items()):
        (items, tokens), _ = counts.most_common(1)[0]
        shapes.append({"kind": kind, "items": items, "tokens": tokens, "calls_in_bucket": sum(counts.values())})
    return shapes


def prepare(folder: Path, logs: list[Path]) -> None:
    from accel.config import settings
    from accel.engines.embeddings import packaged_minilm_path

    embed, rerank = packaged_minilm_path(), settings().models_dir / "rerank-minilm-l6"
    folder.mkdir(parents=True, exist_ok=True)
    for source, name in ((embed / "tokenizer.json", "tokenizer.json"), (embed / "tokenizer_config.json", "tokenizer_config.json"),
                         (embed / "modules.json", "modules.json"), (embed / "sentence_bert_config.json", "sentence_bert_config.json"),
                         (embed / "config.json", "embed-config.json"), (embed / "1_Pooling" / "config.json", "pooling-config.json"),
                         (rerank / "config.json", "rerank-config.json")):
        shutil.copy(source, folder / name)
    if logs:
        (folder / "calls.json").write_text(json.dumps(call_shapes(logs), indent=0))


def build(files: Path, work: Path) -> tuple:
    from sentence_transformers import CrossEncoder, SentenceTransformer
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    torch.manual_seed(0)
    embed_dir, rerank_dir = work / "embed", work / "rerank"
    for folder, config_name, cls in ((embed_dir, "embed-config.json", BertModel),
                                     (rerank_dir, "rerank-config.json", BertForSequenceClassification)):
        folder.mkdir(parents=True, exist_ok=True)
        cls(BertConfig(**json.loads((files / config_name).read_text()))).save_pretrained(folder)
        shutil.copy(files / "tokenizer.json", folder / "tokenizer.json")
        shutil.copy(files / "tokenizer_config.json", folder / "tokenizer_config.json")
    for name in ("modules.json", "sentence_bert_config.json"):
        shutil.copy(files / name, embed_dir / name)
    (embed_dir / "1_Pooling").mkdir(exist_ok=True)
    shutil.copy(files / "pooling-config.json", embed_dir / "1_Pooling" / "config.json")
    (embed_dir / "2_Normalize").mkdir(exist_ok=True)
    st = SentenceTransformer(str(embed_dir), device=DEVICE).to(DTYPE).eval()
    ce = CrossEncoder(str(rerank_dir), device=DEVICE)
    ce_model = ce.model if isinstance(getattr(ce, "model", None), torch.nn.Module) else ce
    ce_model.to(DTYPE).eval()
    lean_embed = BertModel.from_pretrained(embed_dir, dtype=DTYPE).to(DEVICE).eval()
    lean_rerank = BertForSequenceClassification.from_pretrained(rerank_dir, dtype=DTYPE).to(DEVICE).eval()
    dtypes = {"st": str(next(st.parameters()).dtype), "ce": str(next(ce_model.parameters()).dtype)}
    return st, ce, Lean(lean_embed, files / "tokenizer.json", "embed"), Lean(lean_rerank, files / "tokenizer.json", "rerank"), dtypes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", type=Path)
    parser.add_argument("--call-logs", type=Path, nargs="*", default=[])
    parser.add_argument("--files", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--calls", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-encoder-curves"))
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.prepare is not None:
        prepare(args.prepare, args.call_logs)
        return
    if args.files is None or args.out is None:
        parser.error("--files and --out are needed to measure (or --prepare DIR)")
    global DEVICE, DTYPE, EMBED_GRID, RERANK_GRID, OVERLAP
    if args.smoke:
        DEVICE, DTYPE = "cpu", torch.float32
        EMBED_GRID, RERANK_GRID, OVERLAP = {16: (1, 4)}, {64: (1, 4)}, (("rerank", 2, 32), ("embed", 1, 14))
    import sentence_transformers
    import transformers

    began = time.time()
    st, ce, lean_embed, lean_rerank, dtypes = build(args.files, args.work)
    vocab = words(lean_embed.tokenizer)
    rng = np.random.default_rng(0)
    doc: dict = {"meta": {"gpu": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "none (smoke)", "torch": torch.__version__,
                          "transformers": transformers.__version__,
                          "sentence_transformers": sentence_transformers.__version__,
                          "python": platform.python_version(), "kernel": platform.release(),
                          "cpu": platform.processor() or platform.machine(), "cpus": __import__("os").cpu_count(),
                          "dtypes": dtypes, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                          "weights": "random, the shipped encoders' shapes (MiniLM-L6: 6 layers, 384 wide)"},
                 "grid": [], "calls": []}
    paths = {"embed": {"st": lambda b: st.encode(b, batch_size=len(b), convert_to_numpy=True), "lean": lean_embed},
             "rerank": {"st": lambda b: ce.predict(b, batch_size=len(b), convert_to_numpy=True), "lean": lean_rerank}}

    def measure(kind: str, items: int, tokens: int, into: list, **extra) -> None:
        batch = inputs(kind, items, tokens, vocab, rng)
        row = {"kind": kind, "items": items, "tokens": tokens, **extra}
        for path, call in paths[kind].items():
            row[path] = timed(call, batch)
        into.append(row)
        print(json.dumps(row), flush=True)

    def save() -> None:
        doc["meta"]["total_s"] = time.time() - began
        args.out.write_text(json.dumps(doc, indent=1))

    for kind, grid in (("embed", EMBED_GRID), ("rerank", RERANK_GRID)):
        for tokens, batches in grid.items():
            for items in batches:
                measure(kind, items, tokens, doc["grid"])
            save()
    doc["overlap"] = []
    for kind, items, tokens in OVERLAP:
        batch = inputs(kind, items, tokens, vocab, rng)
        for path, call in paths[kind].items():
            row = {"kind": kind, "items": items, "tokens": tokens, "path": path, "calls": 32}
            row.update({f"threads_{n}_ms": 1e3 * overlap(call, batch, 32, n) for n in (1, 2, 4)})
            doc["overlap"].append(row)
            print(json.dumps(row), flush=True)
    save()
    if args.calls is not None:
        for call in json.loads(args.calls.read_text()):
            measure(call["kind"], int(call["items"]), int(call["tokens"]), doc["calls"],
                    **{k: v for k, v in call.items() if k not in ("kind", "items", "tokens")})
        save()


if __name__ == "__main__":
    main()
