"""`accel.types`, the public types: naming them loads no runtime, and the modules they moved
from hand out the same objects."""

from __future__ import annotations

import subprocess
import sys


def test_types_load_no_runtime_session_passes_or_adapters(tmp_path) -> None:
    code = ("import sys, accel.types\n"
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['accel', 'runtime'], ['accel', 'session'], ['accel', 'passes'], ['accel', 'adapters'])))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_old_homes_hand_out_the_public_types() -> None:
    from accel import types
    from accel.adapters.common import bindings
    from accel.runtime import limits, output_stream, policies, watch

    assert (output_stream.Delta, output_stream.Final, output_stream.StreamItem) == (types.Delta, types.Final, types.StreamItem)
    assert (watch.QueryWatcher, policies.PolicyName, limits.EngineLimits) == (types.QueryWatcher, types.PolicyName, types.EngineLimits)
    assert bindings.EngineSpec is types.EngineSpec


def test_policy_names_are_the_runtime_policies() -> None:
    from accel.runtime.policies import POLICIES
    from accel.types import POLICY_NAMES

    assert sorted(POLICY_NAMES) == sorted(POLICIES)
