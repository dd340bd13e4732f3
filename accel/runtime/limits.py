"""`EngineLimits` lives in `accel.engines.limits` (measured engine data); imported back here
until the runtime's own modules import it from there (issue 28, step 1)."""

from accel.engines.limits import EngineLimits

__all__ = ["EngineLimits"]
