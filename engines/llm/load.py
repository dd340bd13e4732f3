"""The vLLM scheduler's load as last reported, for load-aware engine schedulers and tests.

vLLM reports `SchedulerStats` to stat loggers after every engine step; keeping the latest one
lets accel read how many requests the engine core really holds (an aborted request is gone
from `running`/`waiting` on the next step) without any extra round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm.config import VllmConfig
from vllm.v1.metrics.loggers import StatLoggerBase
from vllm.v1.metrics.stats import IterationStats, SchedulerStats


@dataclass(frozen=True)
class EngineLoad:
    running: int = 0
    waiting: int = 0
    kv_cache_usage: float = 0.0
    steps: int = 0  # engine steps reported so far


class LoadRecorder(StatLoggerBase):
    """A vLLM stat logger that only remembers the latest scheduler state."""

    latest: EngineLoad

    def __init__(self, vllm_config: VllmConfig, engine_index: int = 0) -> None:
        self.latest = EngineLoad()

    def record(
        self,
        scheduler_stats: SchedulerStats | None,
        iteration_stats: IterationStats | None,
        mm_cache_stats: object | None = None,
        engine_idx: int = 0,
    ) -> None:
        if scheduler_stats is None:
            return
        self.latest = EngineLoad(
            running=scheduler_stats.num_running_reqs,
            waiting=scheduler_stats.num_waiting_reqs + scheduler_stats.num_skipped_waiting_reqs,
            kv_cache_usage=scheduler_stats.kv_cache_usage,
            steps=self.latest.steps + 1,
        )

    def log_engine_initialized(self) -> None:
        """Nothing to announce; accel logs engine start itself."""
