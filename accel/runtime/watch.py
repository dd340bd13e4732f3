"""`QueryWatcher`: what a query's caller may observe of its nodes while it runs.

A public type, defined in `accel.types` (adapters implement it) and imported back here for the
runtime's modules.
"""

from accel.types import QueryWatcher

__all__ = ["QueryWatcher"]
