"""What a run on engine twins adds to its report: the profile and its label (every number is
simulated), and how far the twins fell behind their model while the run went on.

A twin waits for each step's modelled end on a timer; when this machine is too busy to wake it
in time, the step ends late and `twin:lag_seconds_total` grows (docs/twins.md). The lag is read
from every twin's `/metrics` before and after the run, so a reader can see how much of the
measured time is this machine rather than the modelled hardware.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from .runner import SystemRun

_LAG = re.compile(r"^twin:lag_seconds_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", re.MULTILINE)


def lag_s(stack: Any) -> float | None:
    """The twins' lag so far, summed over the LLM, embedding and rerank twins (None: no twin
    answered, so this is not a twin stack)."""
    total, seen = 0.0, False
    for url in {u for u in (stack.openai_base_url, getattr(stack, "embed_base_url", None),
                            getattr(stack, "rerank_base_url", None)) if u}:
        try:
            text = httpx.get(url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=10).text
        except httpx.HTTPError:
            continue
        values = [float(v) for v in _LAG.findall(text)]
        seen = seen or bool(values)
        total += sum(values)
    return total if seen else None


def simulated(profile: str, lag_before: float | None, lag_after: float | None) -> dict[str, Any]:
    """The report's `simulated` section."""
    from accel.engines.twin.profile import load_profile

    lag = None if lag_before is None or lag_after is None else lag_after - lag_before
    return {"profile": profile, "label": load_profile(profile).label, "twin_lag_s": lag}


def devices(profile: str) -> dict[str, str]:
    """The device each engine's work runs on, as the twins of `profile` model it (for the
    capacity bound, whose engines on one device add up and on separate devices overlap). A GPU
    profile's twins each sleep for their own device, the LLM's steps and each encoder server's
    one stream, so one twin's work never delays another's; a profile of engines on this
    machine's cores (`host_cores`) burns those cores, one device, as the real stack does ({})."""
    from accel.engines.twin.profile import load_profile

    if load_profile(profile).host_cores is not None:
        return {}
    return {engine: f"{engine} twin" for engine in ("llm", "embed", "rerank")}


def step_floor(profile: str, levels: Callable[[int], list[int]], lone: SystemRun, runs: Iterable[SystemRun]) -> dict[str, Any] | None:
    """A batch's step floor on the twins of `profile` (`step_floor.run_floor`), from
    stock-sequential's lone calls (`lone`), never charging more prompt tokens than the run
    that computed the fewest (`runs`, the server's counters) did; with it, `as_sent_s`, the
    same calls on the LLM twin alone, each sent when its level is ready."""
    from accel.engines.twin.profile import load_profile

    from .llm_schedule import makespan_as_sent
    from .step_floor import run_floor

    twin = load_profile(profile)
    computed = [run.prompt_cache["prompt_tokens"] - run.prompt_cache["cached_tokens"]
                for run in runs if run.ok and run.prompt_cache]
    return run_floor(lone.llm_usage, levels, twin.llm, twin.llm_config, min(computed, default=None),
                     as_sent=lambda chains: makespan_as_sent(chains, twin.llm, twin.llm_config))
