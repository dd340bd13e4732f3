"""The two-tier runtime: a graph scheduler per query over engine schedulers per engine."""

from accel.runtime.engine_scheduler import EngineScheduler
from accel.runtime.limits import EngineLimits
from accel.runtime.output_stream import Delta, Final, StreamItem
from accel.runtime.policies import POLICIES, get_policy
from accel.runtime.runtime import Runtime
from accel.runtime.task import EngineTask, Slice

__all__ = ["POLICIES", "Delta", "EngineLimits", "EngineScheduler", "EngineTask", "Final", "Runtime", "Slice", "StreamItem", "get_policy"]
