"""Fit a twin profile to raw measurements (run by a developer, never at run time).

`python -m accel.engines.twin.fit RAW.json ENCODERS.json > engines/twin/profiles/h100-8b.json`
turns the H100 measurements (`gpu-h100-engines.json`, the format of the project's GPU notes, for
the LLM; `scripts/gpu_encoder_curves.py`'s output for the encoders) into the shipped profile: the
measured encoder curves in `accel profile`'s format, the LLM step model's fitted coefficients,
and the measurements themselves for the validation test.
`python -m accel.engines.twin.fit --cpu RAW.json > engines/twin/profiles/cpu-reference.json`
does the same for this machine's CPU engines, from `python -m accel.engines.twin.measure`'s
output. docs/twins.md says how each parameter is derived.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from accel.engines.profile import choose_max_efficient_batch, ProfilePoint

KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2
"""K and V, 32 layers, 8 KV heads of 128, bf16: Llama-3.1-8B's KV cache per token."""
KV_CACHE_BYTES = 80e9 * 0.9 - 16.1e9 - 4e9
"""vLLM's gpu_memory_utilization 0.9 of 80 GB, less bf16 weights and ~4 GB of activations."""


def _encoder_profile(engine: str, label: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    points = [ProfilePoint(r["batch"], r["batch"] / (r["ms"] / 1e3), r["ms"] / 1e3)
              for r in sorted(rows, key=lambda r: r["batch"])]
    return {"engine": engine, "label": label, "max_efficient_batch": choose_max_efficient_batch(points),
            "points": [vars(p) for p in points]}


def _fit_steps(decode: list[dict[str, Any]], prefill: list[dict[str, Any]], per_token_s: float) -> dict[str, float]:
    """The step model's coefficients with the least worst relative error over every measured
    step: decode steps (CUDA graph) and prefills (GPU time at batch 1, where HF's eager launch
    overhead is no part of a vLLM step; call time for batches, compute-bound). For each overlap
    exponent and weight-read floor on a grid, per-sequence and per-KV-token costs are a least
    squares fit to the decode steps' remainder."""
    steps = [(0, 0, r["batch"], r["batch"] * r["kv"], r["ms"] / 1e3) for r in decode]
    steps += [(r["batch"] * r["len"], r["batch"], 0, 0, (r["kernel_ms"] if r["batch"] == 1 else r["ms"]) / 1e3)
              for r in prefill]
    best: tuple[float, dict[str, float]] | None = None
    for p in np.arange(1.5, 6.01, 0.25):
        for floor in np.arange(0.0085, 0.0105, 0.00002):
            def body(tokens: int) -> float:
                return float((floor ** p + (per_token_s * tokens) ** p) ** (1 / p))
            rest = np.array([ms - body(pre + dec) for pre, _, dec, _, ms in steps[:len(decode)]])
            design = np.array([[dec, ctx] for _, _, dec, ctx, _ in steps[:len(decode)]], dtype=float)
            (per_seq, per_ctx), *_ = np.linalg.lstsq(design, rest, rcond=None)
            worst = max(abs(body(pre + dec) + per_seq * (seqs + dec) + per_ctx * ctx - ms) / ms
                        for pre, seqs, dec, ctx, ms in steps)
            if best is None or worst < best[0]:
                best = (worst, {"floor_s": round(float(floor), 7), "per_token_s": per_token_s, "overlap_p": float(p),
                                "per_seq_s": float(per_seq), "per_context_token_s": float(per_ctx)})
    assert best is not None
    return best[1]


EMBED_LABELS = {16: "query", 64: "short", 128: "medium", 256: "chunk"}
RERANK_LABELS = {64: "short", 128: "medium", 288: "pairs", 512: "long"}
"""The length classes of the `h100-8b` encoders: every length the GPU check measured."""


def _encoder_classes(engine: str, labels: dict[int, str], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_encoder_profile(engine, label, [{"batch": r["items"], "ms": r["st"]["ms"]} for r in rows if r["tokens"] == tokens])
            for tokens, label in labels.items()]


def h100_encoders(encoders: dict[str, Any]) -> dict[str, Any]:
    """The `h100-8b` profile's encoder parts from `scripts/gpu_encoder_curves.py`'s output:
    sentence-transformers end to end, every measured length a class, and `host_s` the batch-1
    call of the shortest class (the part that does not grow with the inputs' length)."""
    grid = {kind: [r for r in encoders["grid"] if r["kind"] == kind] for kind in ("embed", "rerank")}

    def cost(kind: str, labels: dict[int, str]) -> dict[str, Any]:
        [call] = [r for r in grid[kind] if r["tokens"] == min(labels) and r["items"] == 1]
        return {"engine": f"twin-{kind}", "classes": {label: tokens for tokens, label in labels.items()},
                "host_s": call["st"]["ms"] / 1e3}

    return {"engines": _encoder_classes("twin-embed", EMBED_LABELS, grid["embed"])
                       + _encoder_classes("twin-rerank", RERANK_LABELS, grid["rerank"]),
            "embed": cost("embed", EMBED_LABELS), "rerank": cost("rerank", RERANK_LABELS),
            "measurements": {"meta": encoders["meta"], "grid": encoders["grid"], "calls": encoders["calls"]}}


def fit_h100(raw: dict[str, Any], encoders: dict[str, Any]) -> dict[str, Any]:
    """The `h100-8b` profile: the Llama-8B-shaped decoder from the H100 runs of 2026-11-23, the
    fp16 MiniLM encoders from `scripts/gpu_encoder_curves.py`'s run (`h100_encoders`)."""
    run1 = raw["run1_engines_hf"]
    decode = [{"batch": r["batch"], "kv": r["kv"], "ms": r["graph_ms"]}
              for r in raw["run3_graph_nomask_breakdown"]["graph_nomask"]["llama-8B"]]
    prefill = [{"batch": r["batch"], "len": r["len"], "ms": r["ms"], "kernel_ms": r["kernel_ms"]}
               for r in run1["llm"]["llama-8B"]["prefill"]]
    per_token_s = float(np.mean([r["ms"] / 1e3 / (r["batch"] * r["len"]) for r in prefill if r["batch"] * r["len"] >= 4096]))
    fitted = h100_encoders(encoders)
    meta = encoders["meta"]
    return {
        "name": "h100-8b",
        "label": "simulated from measured H100 curves",
        "source": "gpu-h100-engines.json (NVIDIA H100 80GB HBM3, 2026-11-23): run1 llama-8B prefill, run3 llama-8B "
                  f"CUDA-graph decode; scripts/gpu_encoder_curves.py ({meta['gpu']}, {meta['measured_at']}): fp16 "
                  "MiniLM encoders, sentence-transformers end to end",
        "engines": fitted["engines"],
        "twin": {
            "llm": {
                "cost": _fit_steps(decode, prefill, per_token_s),
                "config": {"block_size": 16, "max_num_seqs": 1024, "max_num_batched_tokens": 8192,
                           "num_gpu_blocks": int(KV_CACHE_BYTES // (KV_BYTES_PER_TOKEN * 16)), "max_model_len": 8192},
            },
            "embed": fitted["embed"],
            "rerank": fitted["rerank"],
        },
        "measurements": {"llm_decode": decode, "llm_prefill": prefill, "encoders": fitted["measurements"]},
    }


def _non_negative_lstsq(design: np.ndarray, target: np.ndarray) -> list[float]:
    """Least squares with every coefficient >= 0: the best of the plain fits over each subset of
    the columns whose coefficients come out non-negative (the empty one, all zeros, included)."""
    columns = design.shape[1]
    best: tuple[float, list[float]] = (float(np.sum(target ** 2)), [0.0] * columns)
    for mask in range(1, 1 << columns):
        chosen = [c for c in range(columns) if mask >> c & 1]
        coef, *_ = np.linalg.lstsq(design[:, chosen], target, rcond=None)
        if (coef < 0).any():
            continue
        full = [0.0] * columns
        for c, value in zip(chosen, coef, strict=True):
            full[c] = float(value)
        residual = float(np.sum((design @ np.array(full) - target) ** 2))
        if residual < best[0]:
            best = (residual, full)
    return best[1]


def _fit_cpu_steps(decode: list[dict[str, Any]], prefill: list[dict[str, Any]]) -> dict[str, float]:
    """The step model fitted to a CPU's steps: the smoothed roofline of a floor and a cost per
    token, plus a cost per sequence, the decoding sequences' KV reads, and the query-key pairs the
    prefill attends (c * c / 2 for a whole prompt of c). One CPU's steps add up (the earlier
    reference machine: overlap 1, a plain sum); another's decode costs almost nothing from batch
    1 to 4 and then grows (15.8 and 16.8 ms, then 27.8 and 51.7 at 16 and 32), which only a floor
    that the tokens' compute hides under reproduces. So the overlap exponent, the floor and the
    cost per token come from a grid (spans relative to the measured steps), the other costs from
    a non-negative least squares for each grid point; the point with the least squared relative
    error over every measured step wins, refined on a finer grid around it. Batch-1 decode steps
    get a floor of their own (`one_token_floor_s`, the median over them), fitted to what the rest
    of the model leaves of them: they were slower than batch 4 on this machine, which no
    monotone roofline reproduces."""
    alone = [r for r in decode if r["batch"] == 1]
    cost = _fit_cpu_roofline([r for r in decode if r["batch"] != 1] if len(alone) < len(decode) else decode, prefill)
    if alone:
        p = cost["overlap_p"]
        rests = [r["ms"] / 1e3 - cost["per_seq_s"] - cost["per_context_token_s"] * r["kv"] for r in alone]
        floors = [max(rest ** p - cost["per_token_s"] ** p, 0.0) ** (1 / p) for rest in rests]
        cost["one_token_floor_s"] = float(np.median(floors))
    return cost


def _fit_cpu_roofline(decode: list[dict[str, Any]], prefill: list[dict[str, Any]]) -> dict[str, float]:
    rows = [(r["batch"], r["batch"], r["batch"] * r["kv"], 0.0, r["ms"] / 1e3) for r in decode]
    rows += [(r["len"], 1, 0, r["len"] * r["len"] / 2, r["ms"] / 1e3) for r in prefill]
    tokens = np.array([row[0] for row in rows], dtype=float)
    linear = np.array([row[1:4] for row in rows], dtype=float)
    measured = np.array([row[4] for row in rows])
    weights = 1.0 / measured
    smallest = float(measured.min())
    per_token_prefill = max(r["ms"] / 1e3 / r["len"] for r in prefill)

    def fit(p: float, floor: float, per_token: float) -> tuple[float, dict[str, float]]:
        body = (floor ** p + (per_token * tokens) ** p) ** (1 / p)
        coef = _non_negative_lstsq(linear * weights[:, None], (measured - body) * weights)
        error = float(np.sum(((body + linear @ np.array(coef)) / measured - 1.0) ** 2))
        return error, {"floor_s": float(floor), "per_token_s": float(per_token), "overlap_p": float(p),
                       "per_seq_s": coef[0], "per_context_token_s": coef[1], "per_prefill_pair_s": coef[2]}

    floors, per_tokens = np.linspace(0.25 * smallest, 1.25 * smallest, 31), np.linspace(0.25, 2.0, 36) * per_token_prefill
    best = min((fit(p, floor, per_token) for p in CPU_OVERLAP_GRID for floor in floors for per_token in per_tokens),
               key=lambda fitted: fitted[0])
    p, floor, per_token = (best[1][key] for key in ("overlap_p", "floor_s", "per_token_s"))
    floor_step, token_step = floors[1] - floors[0], per_tokens[1] - per_tokens[0]
    finer = min((fit(p, f, t) for f in np.linspace(floor - floor_step, floor + floor_step, 41)
                 for t in np.linspace(per_token - token_step, per_token + token_step, 41) if f > 0 and t > 0),
                key=lambda fitted: fitted[0])
    return min(best, finer, key=lambda fitted: fitted[0])[1]


CPU_OVERLAP_GRID = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0)
"""1: the floor and the tokens' compute add up; higher: the compute hides under the floor."""


CPU_MAX_NUM_SEQS = 128
CPU_MAX_NUM_BATCHED_TOKENS = 2048
"""vLLM's defaults for the OpenAI server on a CPU (`EngineArgs._get_default_...`, world size 1)."""


def _host_cores(machine: dict[str, Any], spin_s: float) -> dict[str, Any]:
    """Where the twins burn: one worker per compute thread of each real server, pinned to the
    cores that server's compute was bound to when it was measured (`llm_cores`, `encoder_cores`;
    vLLM-CPU runs one OpenMP thread per bound core). A measurement without them (servers not
    bound apart) gets unpinned workers, one per core."""
    cores = int(machine["cores"])
    llm, encoder = machine.get("llm_cores"), machine.get("encoder_cores")
    spins = ENGINE_CORE_SPIN_SHARES if llm or encoder else {}
    return {"llm_threads": len(llm) if llm else cores, "llm_cores": llm,
            "embed_threads": len(encoder) if encoder else cores, "rerank_threads": len(encoder) if encoder else cores,
            "encoder_cores": encoder, "idle_spin_s": spin_s,
            **{f"{kind}_spin_share": share for kind, share in spins.items()}}


ENGINE_CORE_SPIN_SHARES = {"llm": 0.40, "embed": 0.85, "rerank": 0.67}
"""The share of a core each real server's engine core process spins while its worker computes
(busy-waiting on the worker's shared-memory queue), read from /proc on this machine's stack with
its servers bound apart, one call at a time on an idle machine (medians of three: a 400-token
prompt with 32 answer tokens, 16 embeddings of 256 tokens, 26 rerank pairs of ~265 tokens;
docs/twins.md). The unpinned twins' workers burned whole cores instead and needed no share."""


def fit_cpu(raw: dict[str, Any]) -> dict[str, Any]:
    """The `cpu-reference` profile from `python -m accel.engines.twin.measure`'s output: the same
    step model fitted to this machine's vLLM-CPU, the encoder servers' measured call curves, and
    `host_cores`, so the twins burn their time on the cores the real servers compute on."""
    llm, encoders = raw["llm"], raw["encoders"]
    decode, prefill = llm["decode"], llm["prefill"]
    cost = _fit_cpu_steps(decode, prefill)
    cache = llm.get("cache_config", {})
    engines = [_encoder_profile("twin-embed", label, c["rows"]) for label, c in encoders["embed"].items()]
    engines.append(_encoder_profile("twin-rerank", "pairs", encoders["rerank"]["pairs"]["rows"]))
    cores = int(raw["machine"]["cores"])
    root = str(llm.get("root") or llm["model"]).rstrip("/")
    tokenizer = next((size for size in ("tiny", "bench") if root.endswith(f"llm-{size}")), None)
    if tokenizer is None:
        raise ValueError(f"the measured LLM ({root}) is not one of the offline models (llm-tiny, llm-bench)")
    answers = llm["answers"]
    ended = [n for n in answers["lengths"] if n < answers["max_tokens"]]
    # a model that ends fewer than one answer in ten early is modelled as running to max_tokens
    answer_tokens = [min(ended), max(ended)] if len(ended) * 10 >= len(answers["lengths"]) else None
    return {
        "name": "cpu-reference",
        "label": "simulated from measured curves of this machine's CPU engines",
        "source": f"python -m accel.engines.twin.measure on {raw['date']}: {cores} cores, vLLM {raw.get('vllm')}, "
                  f"LLM {llm['model']}, encoders {encoders['embed_model']} / {encoders['rerank_model']}",
        "engines": engines,
        "twin": {
            "llm": {
                "cost": cost,
                "config": {"block_size": int(cache.get("block_size", 16)), "max_num_seqs": CPU_MAX_NUM_SEQS,
                           "max_num_batched_tokens": CPU_MAX_NUM_BATCHED_TOKENS,
                           "num_gpu_blocks": int(cache.get("num_gpu_blocks", 8192)),
                           "max_model_len": int(llm.get("max_model_len") or 2048)},
                "tokenizer": tokenizer,
                "answer_tokens": answer_tokens,
            },
            "embed": {"engine": "twin-embed", "classes": {label: c["tokens"] for label, c in encoders["embed"].items()},
                      "host_s": encoders["embed_host_ms"] / 1e3, "padded": False},
            "rerank": {"engine": "twin-rerank", "classes": {"pairs": encoders["rerank"]["pairs"]["tokens"]},
                       "host_s": encoders["rerank_host_ms"] / 1e3, "padded": False},
            "host_cores": _host_cores(raw["machine"], float(raw.get("spin_s") or 0.0)),
        },
        "measurements": {"llm_decode": decode, "llm_prefill": prefill, "raw": raw},
    }


def _read(path: str) -> Any:
    with open(path) as source:
        return json.load(source)


if __name__ == "__main__":
    if sys.argv[1] == "--cpu":
        profile = fit_cpu(_read(sys.argv[2]))
    else:
        profile = fit_h100(_read(sys.argv[1]), _read(sys.argv[2]))
    json.dump(profile, sys.stdout, indent=1)
    sys.stdout.write("\n")
