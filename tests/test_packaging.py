"""The distribution installs its folders under the accel namespace only."""

import subprocess
import sys


def _imports(module: str, cwd) -> bool:
    code = f"import {module}"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True).returncode == 0


def test_namespaced_packages_import_and_generic_names_do_not(tmp_path):
    for module in ("accel", "accel.engines", "accel.adapters", "accel.tracer", "accel.patches"):
        assert _imports(module, tmp_path), module
    for generic in ("engines", "adapters", "tracer", "patches"):
        assert not _imports(generic, tmp_path), generic


def test_import_accel_stays_light(tmp_path):
    code = "import sys, accel, accel.engines; print(sorted(m for m in ('vllm', 'torch', 'langchain_core', 'llama_index') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
