"""`WrapOptions`: what `accel.wrap` lets a user choose, one typed object for every adapter.

Checked when the app is wrapped (a typo in a pass or policy name fails there, naming the
choices), and handed to the adapter whole. An adapter says which options it honours
(`register_adapter(..., honours=...)`); one set to a non-default value that the adapter has no
use for is logged, never dropped in silence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `import accel` stays light: the IR and the engines load on first use
    from accel.types import PolicyName


class OptionsError(ValueError):
    """An `accel.wrap` option that does not exist or has no valid value."""


@dataclass(frozen=True)
class WrapOptions:
    policy: PolicyName = "topology"
    """How engine schedulers form batches: "topology" (Teola's depth-aware batching), "po"
    (per invocation) or "to" (FIFO)."""
    disabled_passes: tuple[str, ...] = ()
    """Optimisation passes switched off for this app (ablations, or a pass that misbehaves)."""
    fallback: bool = True
    """On an engine failure before any opaque user code ran, answer with the stock app instead
    of raising (adapters that can re-run stock; others raise the stock client's error)."""

    def __post_init__(self) -> None:
        from accel.passes import PASSES, PROGRAM_PASSES
        from accel.types import POLICY_NAMES

        object.__setattr__(self, "disabled_passes", tuple(self.disabled_passes))
        if self.policy not in POLICY_NAMES:
            raise OptionsError(f"accel.wrap: unknown policy {self.policy!r}. Remedy: use one of {sorted(POLICY_NAMES)}.")
        unknown = [name for name in self.disabled_passes if name not in PASSES and name not in PROGRAM_PASSES]
        if unknown:
            raise OptionsError(f"accel.wrap: unknown pass(es) {unknown} in disabled_passes. "
                               f"Remedy: use names of registered passes {[*PASSES, *PROGRAM_PASSES]}.")
        if not isinstance(self.fallback, bool):
            raise OptionsError(f"accel.wrap: fallback must be True or False, not {self.fallback!r}.")

    def updated(self, **changes: Any) -> WrapOptions:
        """A copy with `changes` (None values leave a field as it is)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def non_default(self) -> list[str]:
        """Names of the options set to something else than their default."""
        default = WrapOptions()
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)]

    @staticmethod
    def of(options: WrapOptions | None = None, *, policy: PolicyName | None = None,
           disabled_passes: Iterable[str] | None = None, fallback: bool | None = None) -> WrapOptions:
        """`options` (or the defaults) with the keyword overrides applied, checked."""
        passes = None if disabled_passes is None else tuple(disabled_passes)
        return (options or WrapOptions()).updated(policy=policy, disabled_passes=passes, fallback=fallback)
