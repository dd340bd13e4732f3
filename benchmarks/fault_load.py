"""The load part of the fault campaign (`python -m accel.benchmarks.faults --load-minutes M`):
the wrapped app under Poisson arrivals at ~90% of its measured capacity, watched per minute for
growth (RSS, threads), unbounded queues and latency drift."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from accel.benchmarks.fault_stack import FaultStack
from accel.benchmarks.faults import HANG_S, Apps, _invoke, _questions, run_queries


def load_run(stack: FaultStack, apps: Apps, reference: dict[str, str], minutes: float) -> dict[str, Any]:
    """Poisson arrivals at ~90% of the wrapped app's measured capacity for `minutes`: per
    minute, p50/p99 latency, the process's RSS and threads and the engine queues (max of 5 s
    samples), and answers equal to stock."""
    import random
    import statistics
    import threading

    import psutil

    from accel.session import get_session

    app = apps.get("accel")
    questions = _questions()
    run_queries(app, questions)  # warm
    began = time.perf_counter()
    run_queries(app, questions)
    capacity = len(questions) / (time.perf_counter() - began)
    rate = 0.9 * capacity
    process, rng = psutil.Process(), random.Random(14)
    samples: list[tuple[float, int, int, int]] = []
    done = threading.Event()
    start = time.perf_counter()

    def sample() -> None:
        while not done.wait(5.0):
            runtime = get_session()._runtime
            queued = sum(s.queued for s in runtime.schedulers.values()) if runtime else 0
            samples.append((time.perf_counter() - start, process.memory_info().rss, threading.active_count(), queued))

    sampler = threading.Thread(target=sample, name="load-sampler", daemon=True)
    sampler.start()
    finished: list[tuple[float, float, str, str | None]] = []  # (end offset, latency, question, answer)
    pool = ThreadPoolExecutor(64, thread_name_prefix="load-query")

    def one(question: str, sent: float) -> None:
        _, answer, _ = _invoke(app, question)
        end = time.perf_counter()
        finished.append((end - start, end - sent, question, answer))

    futures, n = [], 0
    while time.perf_counter() - start < minutes * 60:
        time.sleep(rng.expovariate(rate))  # the arrival process of a load generator
        futures.append(pool.submit(one, questions[n % len(questions)], time.perf_counter()))
        n += 1
    wait(futures, timeout=HANG_S)
    done.set()
    pool.shutdown(wait=False, cancel_futures=True)
    per_minute = []
    for minute in range(int(minutes + 0.999)):
        lat = sorted(l for end, l, _, _ in finished if minute * 60 <= end < (minute + 1) * 60)
        window = [s for s in samples if minute * 60 <= s[0] < (minute + 1) * 60] or samples[-1:]
        per_minute.append({
            "minute": minute + 1, "queries": len(lat),
            "p50_s": round(statistics.median(lat), 3) if lat else None,
            "p99_s": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3) if lat else None,
            "rss_mib": round(max(s[1] for s in window) / 2**20) if window else None,
            "threads": max(s[2] for s in window) if window else None,
            "queued_max": max(s[3] for s in window) if window else None,
        })
    equal = sum(answer == reference[q] for _, _, q, answer in finished)
    return {"minutes": minutes, "capacity_qps": round(capacity, 2), "rate_qps": round(rate, 2), "sent": n,
            "answered": sum(a is not None for *_, a in finished), "hangs": n - len(finished),
            "equal_to_stock": f"{equal}/{len(finished)}", "per_minute": per_minute}
