"""Replicated engines (issue 14) on a local two-node Ray cluster: the LangChain advanced-RAG
example over 2 replicas of each engine (2 vLLM endpoints; embedder and reranker as 2 Ray actors
each, spread over the nodes; Postgres stays one server), answers equal to stock; then one vLLM
replica dies with an answer in flight and one reranker actor is killed mid-run, and no query
is lost.

The scenario runs in a child process (this file as a script): it needs its own accel session
and environment (ACCEL_RAY_ADDRESS, ACCEL_OPENAI_REPLICA_URLS), which must not leak into the
other tests' process-wide session. The first vLLM replica is the session's shared server; the
second is a fault proxy in front of it (`accel.testing.faults.FaultProxy`, issue 26: a second
vLLM server cost a launch of its own, and its SIGKILL after a sleep could land before any
request reached it or after the run). The proxy dies as a server does (held answers reset, new
connections refused) once one answer is held on it, so the fault is mid-run whatever the
machine's speed; the real SIGKILL of a vLLM server is tests/engines/llm/test_server.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.engines, pytest.mark.slow, pytest.mark.timeout(2400)]
QUESTIONS = ["How do I push an item onto a heap?", "How do I find where to insert into a sorted list?",
             "What does functools.partial do?", "How can I merge sorted iterables?",
             "How do I cache the results of a function?", "How do I get the n smallest items?"]


def test_advanced_rag_over_two_replicas_of_each_engine_on_two_ray_nodes(vllm_server, postgres_factory, tmp_path):
    pytest.importorskip("ray")
    from tests.offline_models import suite_reranker  # the child runs this file as a script: it gets the path

    # Ray starts its workers (here the engine actors) at nice 15: beside other work at normal
    # priority (a busy machine, issue 26) they got almost no CPU, and the first run took over ten
    # minutes of actors loading their models; 0 runs them as the session's own engines run
    env = dict(os.environ, ACCEL_HOME=str(tmp_path / "home"), SCALEOUT_FIRST=vllm_server.base_url,
               SCALEOUT_PG=postgres_factory("accel-scaleout-"), SCALEOUT_RERANKER=suite_reranker(),
               RAY_worker_niceness="0")
    for name in ("ACCEL_RAY_ADDRESS", "ACCEL_OPENAI_REPLICA_URLS"):  # the child sets both
        env.pop(name, None)
    done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-6000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["equal"] == report["queries"] == len(QUESTIONS), report
    assert len(set(report["embed_nodes"])) == 2 and len(set(report["rerank_nodes"])) == 2, report
    assert all(served > 0 for served in report["llm_served"]), report  # both vLLM replicas took requests
    assert report["fault"]["held"] >= 1, report  # an answer was in flight on the replica that died
    assert report["fault"]["lost"] == 0 and report["fault"]["equal"] == len(QUESTIONS), report
    assert report["fault"]["llm_retried"] > 0, report  # the held answer was sent again to the other


# ---- the child process ---------------------------------------------------------------------------


def _say(message: str) -> None:
    print(f"[scaleout {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _scenario() -> dict:
    import threading

    import ray
    from ray.cluster_utils import Cluster

    from accel.testing.faults import FaultProxy

    first = os.environ["SCALEOUT_FIRST"]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=2)
    _say(f"two-node Ray cluster at {cluster.address}")
    os.environ["ACCEL_RAY_ADDRESS"] = cluster.address
    try:
        with FaultProxy(first.removesuffix("/v1")) as second:
            os.environ["ACCEL_OPENAI_REPLICA_URLS"] = f"{first},{second.url}/v1"
            ray.init(address=cluster.address, log_to_driver=False)
            return _run_apps(ray, second, threading)
    finally:
        ray.shutdown()
        cluster.shutdown()


def _run_apps(ray, second, threading) -> dict:
    import asyncio

    import accel
    from accel.engines.embeddings import packaged_minilm_path
    from accel.engines.replicas import ReplicatedEngine, ReplicatedLLM
    from accel.examples.corpus import pydoc_documents
    from accel.examples.langchain import advanced_rag
    from accel.examples.stack import StackConfig
    from accel.session import get_session

    config = StackConfig(os.environ["SCALEOUT_FIRST"], "tiny", os.environ["SCALEOUT_PG"], str(packaged_minilm_path()),
                         os.environ["SCALEOUT_RERANKER"], max_tokens=12, context_window=2048)
    store = advanced_rag.build_index(config, pydoc_documents(["heapq", "bisect", "functools", "itertools"]), "scaleout")
    _say("index built")
    stock = advanced_rag.build_app(config, store)
    wrapped = accel.wrap(stock)
    inputs = [{"question": q} for q in QUESTIONS]
    expected = [stock.invoke(x) for x in inputs]
    _say("stock answered")
    got = wrapped.batch(inputs)
    _say("wrapped answered")

    session = get_session()
    engines = list(session._engines.values())
    llm = next(e for e in engines if isinstance(e, ReplicatedLLM))
    embed = next(e for e in engines if isinstance(e, ReplicatedEngine) and e.kind == "embed")
    rerank = next(e for e in engines if isinstance(e, ReplicatedEngine) and e.kind == "rerank")

    def on_loop(coro):
        return asyncio.run_coroutine_threadsafe(coro, session.loop).result(120)

    report = {
        "queries": len(inputs), "equal": sum(a == b for a, b in zip(got, expected)),
        "embed_nodes": [on_loop(r.engine.node()) for r in embed.set.replicas],
        "rerank_nodes": [on_loop(r.engine.node()) for r in rerank.set.replicas],
        "llm_served": [r.served for r in llm.set.replicas],
    }

    # Faults mid-run: the second vLLM replica dies once an answer is in flight on it, and one
    # reranker actor is killed (Ray restarts it).
    results: list = []
    runner = threading.Thread(target=lambda: results.extend(wrapped.batch(inputs, return_exceptions=True)))
    llm_before, rerank_before = llm.set.retried, rerank.set.retried
    second.hold_generations(after_events=0)
    runner.start()
    held = second.wait_held(1, timeout_s=300)
    ray.kill(rerank.set.replicas[0].engine.actor, no_restart=False)
    second.kill()
    _say(f"faults injected ({held} answer(s) held on the second replica)")
    runner.join(600)
    _say("faulted run finished")
    report["fault"] = {
        "held": held,
        "lost": sum(isinstance(r, BaseException) for r in results) + (len(inputs) - len(results)),
        "errors": [repr(r)[:300] for r in results if isinstance(r, BaseException)],
        "equal": sum(a == b for a, b in zip(results, expected)),
        "llm_retried": llm.set.retried - llm_before, "rerank_retried": rerank.set.retried - rerank_before,
    }
    accel.session.shutdown()
    return report


if __name__ == "__main__":
    print(json.dumps(_scenario()))
