"""Programs in the runtime: the engine calls of wrapped runs (apps running their own code),
their priorities, and learned prefill's warm-up policy and spare-capacity gate."""

from accel.runtime.programs.calls import TEXT_RESULTS, Programs
from accel.runtime.programs.learned import ProgramModel, RunRecorder, WarmDecisions, Warm
from accel.runtime.programs.priority import MAX_LEVEL, QUANTUM_S, Priorities, plas_level
from accel.runtime.programs.spare import SpareGate

__all__ = ["MAX_LEVEL", "QUANTUM_S", "TEXT_RESULTS", "Priorities", "ProgramModel", "Programs", "RunRecorder", "SpareGate",
           "Warm", "WarmDecisions", "plas_level"]
