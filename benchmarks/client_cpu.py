"""The CPU one LLM request costs accel's session loop in its engine client: `OpenAIServerEngine`
on the HTTP transport accel ships (`engines/http_client.py`, aiohttp's connections) against the
same client on httpx's own transport (httpcore), interleaved round by round, against a running
OpenAI-compatible server (an `h100-8b` twin answers at GPU speed, so the client's share shows).

    ACCEL_HOME=<home with a stack up> .venv/bin/python -m accel.benchmarks.client_cpu [--inflight 256] [--rounds 6]

Each round sends `--inflight` chat requests at once (distinct prompts, `--max-tokens` tokens
each) and reads this process's CPU time (`time.process_time`, which other processes loading the
machine do not inflate); the figure is its median per request over the rounds. The first round
of each transport opens its connections and is left out (a warm-up).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import httpx

from accel.engines.base import GenerationRequest, SamplingParams
from accel.engines.llm.openai_client import OpenAIServerEngine

TRANSPORTS = ("aiohttp (shipped)", "httpx / httpcore")


def _on_httpx(engine: OpenAIServerEngine) -> None:
    """The engine's client rebuilt on httpx's own transport: same headers, timeout and limits."""
    shipped = engine._client  # noqa: SLF001 - a measurement swaps the transport, nothing else
    assert shipped is not None
    engine._client = httpx.AsyncClient(  # noqa: SLF001
        headers=shipped.headers, timeout=shipped.timeout,
        transport=httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=None, max_keepalive_connections=None,
                                                               keepalive_expiry=2.0)))


async def _round(engine: OpenAIServerEngine, inflight: int, max_tokens: int) -> float:
    requests = [GenerationRequest(messages=[{"role": "user", "content": f"{uuid.uuid4().hex}: what is a heap? ({i})"}],
                                  params=SamplingParams(max_tokens=max_tokens)) for i in range(inflight)]
    began = time.process_time()
    answers = await asyncio.gather(*(engine.generate(request) for request in requests))
    spent = time.process_time() - began
    assert all(answer.completion_tokens > 0 for answer in answers)
    return 1000 * spent / inflight


async def measure(base_url: str, model: str, *, inflight: int, rounds: int, max_tokens: int) -> dict[str, list[float]]:
    engines = {name: OpenAIServerEngine(base_url, model) for name in TRANSPORTS}
    for name, engine in engines.items():
        await engine.start()
        if name != TRANSPORTS[0]:
            await engine._client.aclose()  # type: ignore[union-attr]  # noqa: SLF001
            _on_httpx(engine)
        await _round(engine, inflight, max_tokens)  # connections opened
    per_request: dict[str, list[float]] = {name: [] for name in TRANSPORTS}
    try:
        for turn in range(rounds):
            order = TRANSPORTS if turn % 2 == 0 else TRANSPORTS[::-1]
            for name in order:
                per_request[name].append(await _round(engines[name], inflight, max_tokens))
    finally:
        for engine in engines.values():
            await engine.stop()
    return per_request


def main() -> None:
    from accel.engines.stack import read_state

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inflight", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=4)
    args = parser.parse_args()
    stack = read_state()
    if stack is None:
        raise SystemExit("client_cpu: no stack is up in this ACCEL_HOME. Remedy: `accel up` (or `accel up --twin h100-8b`) first.")
    results = asyncio.run(measure(stack.openai_base_url, stack.model, inflight=args.inflight, rounds=args.rounds,
                                  max_tokens=args.max_tokens))
    print(f"LLM engine client CPU per request, {args.inflight} in flight, {args.max_tokens}-token answers, "
          f"{args.rounds} interleaved rounds ({stack.openai_base_url})")
    for name, values in results.items():
        print(f"  {name:18} median {statistics.median(values):.2f} ms  (rounds {min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main()
