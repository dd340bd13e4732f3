"""What a run on engine twins adds to its report: the profile and its label (every number is
simulated), and how far the twins fell behind their model while the run went on.

A twin waits for each step's modelled end on a timer; when this machine is too busy to wake it
in time, the step ends late and `twin:lag_seconds_total` grows (docs/twins.md). The lag is read
from every twin's `/metrics` before and after the run, so a reader can see how much of the
measured time is this machine rather than the modelled hardware.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from .runner import SystemRun

log = logging.getLogger("accel.benchmarks.twin_run")


def _metric(name: str) -> re.Pattern[str]:
    return re.compile(rf"^{name}(?:\{{[^}}]*\}})?\s+([0-9.eE+-]+)$", re.MULTILINE)


_LAG = _metric("twin:lag_seconds_total")
_BUSY = _metric("twin:simulated_seconds_total")
_STEPS = _metric("twin:steps_total")
_CPU = re.compile(r"^process_cpu_seconds_total\s+([0-9.eE+-]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Reading:
    """The twins' counters at one moment: each twin's lag and the CPU their process has spent
    (None where no twin answered: not a twin stack)."""

    lag_by_twin: dict[str, float]
    """Each twin's own lag ("llm", "embed", "rerank"): which one fell behind. Under a stock
    LlamaIndex batch it was the embedding twin's, not the LLM's (2026-12-06)."""
    cpu_s: float | None
    busy_by_twin: dict[str, float] = field(default_factory=dict)
    """Each twin's modelled busy time so far (`twin:simulated_seconds_total`: the LLM's steps,
    an encoder device's calls), idle time excluded."""
    llm_steps: float | None = None

    @property
    def lag_s(self) -> float | None:
        """The twins' lag, summed over them (None: no twin answered)."""
        return sum(self.lag_by_twin.values()) if self.lag_by_twin else None

    def since(self, before: Reading) -> tuple[float | None, float | None]:
        """Lag and CPU between `before` and this reading (None where either lacks it)."""
        def delta(now: float | None, then: float | None) -> float | None:
            return None if now is None or then is None else now - then

        return delta(self.lag_s, before.lag_s), delta(self.cpu_s, before.cpu_s)

    def lag_by_twin_since(self, before: Reading) -> dict[str, float] | None:
        """Each twin's lag between `before` and this reading (None: no twin read both times)."""
        return _per_twin_since(self.lag_by_twin, before.lag_by_twin) or None

    def busy_since(self, before: Reading) -> dict[str, float] | None:
        """Each twin's modelled busy seconds between `before` and this reading, and the LLM
        twin's steps (`llm_steps`); None where no twin reported them both times."""
        busy = _per_twin_since(self.busy_by_twin, before.busy_by_twin)
        if self.llm_steps is not None and before.llm_steps is not None:
            busy["llm_steps"] = self.llm_steps - before.llm_steps
        return busy or None


def _per_twin_since(now: dict[str, float], then: dict[str, float]) -> dict[str, float]:
    """A per-twin counter's growth between two readings, for the twins both hold."""
    return {twin: now[twin] - then[twin] for twin in sorted(now.keys() & then.keys())}


def read(stack: Any) -> Reading:
    """Each twin's `/metrics`, fetched once. The CPU is the LLM twin's `process_cpu_seconds_total`:
    `accel up --twin` serves the encoder twins from the same process, so that one reading holds
    all three. The twins model GPU servers, yet their own work (tokenising prompts, writing
    answers) runs on this machine's cores beside the app; a run's share says how much."""
    by_twin: dict[str, float] = {}
    busy: dict[str, float] = {}
    steps = None
    cpu = None
    llm = stack.openai_base_url
    urls = {"llm": llm, "embed": getattr(stack, "embed_base_url", None), "rerank": getattr(stack, "rerank_base_url", None)}
    for twin, url in urls.items():
        if not url or (twin != "llm" and url == llm):
            continue
        try:
            text = httpx.get(url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=10).text
        except httpx.HTTPError:
            continue
        if values := [float(v) for v in _LAG.findall(text)]:
            by_twin[twin] = sum(values)
        if spent := [float(v) for v in _BUSY.findall(text)]:
            busy[twin] = sum(spent)
        if twin == "llm" and (counted := [float(v) for v in _STEPS.findall(text)]):
            steps = sum(counted)
        if url == llm and values and (found := _CPU.search(text)):  # a real server's process is not the twins'
            cpu = float(found.group(1))
    return Reading(by_twin, cpu, busy, steps)


def lag_s(stack: Any) -> float | None:
    """The twins' lag so far (`read`)."""
    return read(stack).lag_s


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


def step_floor(profile: str, levels: Callable[[int], list[int]], lone: SystemRun, runs: Iterable[SystemRun],
               stack: Any = None) -> dict[str, Any] | None:
    """A batch's step floor on the twins of `profile` (`step_floor.run_floor`), from
    stock-sequential's lone calls (`lone`), never charging more prompt tokens than the run
    that computed the fewest (`runs`, the server's counters) did; with it, `as_sent_s`, the
    same calls on the LLM twin alone, each sent when its level is ready, and, where the
    encoder twins of `stack` logged the lone queries' calls (`lone_encoder_work`),
    `as_sent_encoders_s`, the same with those calls queued on the encoders' devices."""
    from accel.engines.twin.profile import load_profile

    from .llm_schedule import encoder_devices, makespan_as_sent
    from .step_floor import run_floor

    twin = load_profile(profile)
    devices = encoder_devices(twin)
    computed = [run.prompt_cache["prompt_tokens"] - run.prompt_cache["cached_tokens"]
                for run in runs if run.ok and run.prompt_cache]
    return run_floor(lone.llm_usage, levels, twin.llm, twin.llm_config, min(computed, default=None),
                     as_sent=lambda chains: makespan_as_sent(chains, twin.llm, twin.llm_config, devices),
                     encoders=lone_encoder_work(stack, lone) if stack is not None else None)


ENCODER_TWINS = (("embed", "embed_base_url"), ("rerank", "rerank_base_url"))
"""Each encoder device the schedule models, and the stack field holding its twin's URL."""


def lone_encoder_work(stack: Any, lone: SystemRun) -> list[Any] | None:
    """What each query of a sequential run (`lone`) asked of the encoder twins, from their call
    logs (`GET /admin/calls`, stamped on this host's monotonic clock, as `lone.lone_spans`):
    the calls that arrived while the query ran, as `step_floor.EncoderWork`. None where a
    query failed, the run kept no spans, or a twin holds no log (not a twin stack, or one
    started before the log existed): the reference then leaves the encoders out, and says so."""
    from .step_floor import EncoderWork, Stage

    spans = lone.lone_spans
    if not spans or any(span is None for span in spans) or len(spans) != len(lone.llm_usage):
        return None
    since = min(span.start for span in spans if span is not None)
    logged: list[tuple[float, Stage]] = []
    for device, field in ENCODER_TWINS:
        url = getattr(stack, field, None)
        if not url:
            continue
        try:
            response = httpx.get(url.rstrip("/").removesuffix("/v1") + "/admin/calls", params={"since": since}, timeout=10)
            response.raise_for_status()
            calls = response.json()["calls"]
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            log.info("encoder twin %s at %s: no call log (%s); the reference leaves the encoders out", device, url, exc)
            return None
        logged += [(c["at"], Stage(device, int(c["items"]), max(1, round(c["tokens"])))) for c in calls]
    return [EncoderWork(tuple(start for start, _ in span.llm),
                        tuple((at, stage) for at, stage in logged if span.start <= at <= span.end))
            for span in spans if span is not None]
