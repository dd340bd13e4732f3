"""Every ACCEL_* environment variable is read in one place, `accel.config.Settings`.

`test_env_read_only_in_config` scans the library's source (accel/, adapters/, engines/,
patches/, tracer/) for reads of the process environment whose name is an ACCEL_ one: a literal,
a module constant, or a name handed to a helper that reads the environment. The rest check that
the settings mean what the code that used to read the variables meant.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from accel.config import Settings

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("accel", "adapters", "engines", "patches", "tracer")
CONFIG = ROOT / "accel" / "config.py"
READERS = {"get", "setdefault", "pop", "getenv", "getenvb", "__getitem__", "__contains__"}


def _library_files() -> list[Path]:
    """The library's .py files, each once (accel/engines etc. are links to the top folders,
    which `os.walk` does not follow)."""
    files: list[Path] = []
    for top in LIBRARY:
        for folder, _, names in os.walk(ROOT / top):
            files += [Path(folder) / name for name in names if name.endswith(".py")]
    return sorted(files)


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (isinstance(node, ast.Name) and node.id == "environ")


def _env_keys(tree: ast.Module) -> list[tuple[ast.expr, ast.AST]]:
    """(key expression, where) of every read of the process environment in `tree`."""
    found: list[tuple[ast.expr, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in READERS and _is_environ(func.value):
                found.append((node.args[0], node))  # os.environ.get(KEY, ...)
            elif (isinstance(func, ast.Attribute) and func.attr in ("getenv", "getenvb")) or \
                    (isinstance(func, ast.Name) and func.id == "getenv"):
                found.append((node.args[0], node))  # os.getenv(KEY)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            found.append((node.slice, node))  # os.environ[KEY]
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            found.append((node.left, node))  # KEY in os.environ
    return found


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "..."` strings."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _accel_name(key: ast.AST, constants: dict[str, str]) -> bool:
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value.startswith("ACCEL_")
    if isinstance(key, ast.Name):
        return constants.get(key.id, "").startswith("ACCEL_")
    if isinstance(key, ast.JoinedStr) and key.values:
        return _accel_name(key.values[0], constants)
    return False


def _helpers(tree: ast.Module) -> dict[str, int]:
    """Functions that read the environment under one of their parameters: name -> its position."""
    helpers: dict[str, int] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        for key, _ in _env_keys(ast.Module(body=fn.body, type_ignores=[])):
            if isinstance(key, ast.Name) and key.id in params:
                helpers[fn.name] = params.index(key.id)
    return helpers


def env_reads(source: str) -> list[int]:
    """Lines of `source` that read an ACCEL_* variable from the environment."""
    tree = ast.parse(source)
    constants = _constants(tree)
    lines = [where.lineno for key, where in _env_keys(tree) if _accel_name(key, constants)]
    helpers = _helpers(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            at = helpers.get(name) if name else None
            if at is not None and len(node.args) > at and _accel_name(node.args[at], constants):
                lines.append(node.lineno)
    return sorted(lines)


def test_env_read_only_in_config() -> None:
    files = _library_files()
    assert CONFIG in files and len(files) > 100, "the scan must see the library's source"
    offenders = [f"{path.relative_to(ROOT)}:{line}" for path in files if path != CONFIG
                 for line in env_reads(path.read_text())]
    assert offenders == [], ("ACCEL_* variables read outside accel/config.py: add a `Settings` field and "
                             f"read it there: {offenders}")


@pytest.mark.parametrize("source", [
    'import os\nx = os.environ.get("ACCEL_NEW", "")',
    'import os\nx = os.getenv("ACCEL_NEW")',
    'from os import getenv\nx = getenv("ACCEL_NEW")',
    'import os\nx = os.environ["ACCEL_NEW"]',
    'import os\nx = "ACCEL_NEW" in os.environ',
    'import os\nENV = "ACCEL_NEW"\nx = os.environ.get(ENV)',
    'import os\ndef _env(name):\n    return os.environ.get(name, "").strip()\nx = _env("ACCEL_NEW")',
    'import os\nx = os.environ.get(f"ACCEL_{1}")',
])
def test_the_scan_sees_each_kind_of_read(source: str) -> None:
    assert env_reads(source) != []


@pytest.mark.parametrize("source", [
    'import os\nx = os.environ.get("VLLM_CPU_KVCACHE_SPACE")',
    'import os\nenv = dict(os.environ)\nenv["ACCEL_AUTO"] = "1"',  # an environment for a child process
    'import os\nos.environ["ACCEL_SERVER_LOG"] = "x"',
])
def test_the_scan_leaves_other_code_alone(source: str) -> None:
    assert env_reads(source) == []


def test_switches_keep_their_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ACCEL_AUTO", "ACCEL_PROGRAM_PRIORITY"):
        monkeypatch.delenv(name, raising=False)
    unset = Settings()
    assert (unset.auto, unset.program_priority) == (False, True)
    for value, on in (("1", True), ("yes", True), ("0", False), ("off", False), ("maybe", False)):
        monkeypatch.setenv("ACCEL_AUTO", value)
        assert Settings().auto is on, value
    for value, on in (("0", False), (" False ", False), ("no", False), ("1", True), ("", True)):
        monkeypatch.setenv("ACCEL_PROGRAM_PRIORITY", value)
        assert Settings().program_priority is on, value


def test_scale_out_and_hosting_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ACCEL_RAY_ADDRESS", "ACCEL_REPLICAS", "ACCEL_OPENAI_REPLICA_URLS", "ACCEL_HOST_LLM", "ACCEL_HOME"):
        monkeypatch.delenv(name, raising=False)
    unset = Settings()
    assert (unset.ray_address, unset.replicas, unset.openai_replica_urls, unset.host_llm, unset.home_from_env) == \
        (None, None, (), None, False)
    monkeypatch.setenv("ACCEL_RAY_ADDRESS", " local ")
    monkeypatch.setenv("ACCEL_REPLICAS", "3")
    monkeypatch.setenv("ACCEL_OPENAI_REPLICA_URLS", "http://a:1/v1/, ,http://b:2/v1")
    monkeypatch.setenv("ACCEL_HOST_LLM", "http://localhost:8000/v1=/models/x")
    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    cfg = Settings()
    assert (cfg.ray_address, cfg.replicas, cfg.openai_replica_urls) == ("local", 3, ("http://a:1/v1/", "http://b:2/v1"))
    assert (cfg.host_llm, cfg.home, cfg.home_from_env) == ("http://localhost:8000/v1=/models/x", tmp_path, True)
    monkeypatch.setenv("ACCEL_REPLICAS", "two")
    with pytest.raises(ValueError, match="ACCEL_REPLICAS='two' is not a whole number"):
        Settings()


def test_vllm_args_are_shell_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCEL_VLLM_ARGS", raising=False)
    assert Settings().vllm_args == ()
    monkeypatch.setenv("ACCEL_VLLM_ARGS", "--enforce-eager  --override-generation-config '{\"temperature\": 0}'")
    assert Settings().vllm_args == ("--enforce-eager", "--override-generation-config", '{"temperature": 0}')


def test_readers_follow_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The modules that read these variables before they were settings answer as before."""
    from accel import patches
    from accel.engines import scaleout
    from accel.hosting import hosted_llm

    monkeypatch.setenv("ACCEL_AUTO", "1")
    assert patches.enabled()
    monkeypatch.setenv("ACCEL_AUTO", "0")
    assert not patches.enabled()

    monkeypatch.setenv("ACCEL_REPLICAS", "0")
    assert scaleout.replica_count() == 1
    monkeypatch.delenv("ACCEL_REPLICAS")
    assert scaleout.replica_count() == scaleout.DEFAULT_REPLICAS
    monkeypatch.setenv("ACCEL_OPENAI_REPLICA_URLS", "http://a:1/v1/,http://b:2/v1")
    assert scaleout.llm_replica_urls("http://b:2/v1/") == ["http://b:2/v1", "http://a:1/v1"]
    assert scaleout.llm_replica_urls("http://c:3/v1") == ["http://c:3/v1"]
    monkeypatch.setenv("ACCEL_RAY_ADDRESS", "auto")
    assert scaleout.ray_address() == "auto"

    monkeypatch.setenv("ACCEL_HOST_LLM", "http://localhost:8000/v1")
    monkeypatch.setenv("ACCEL_LLM_MODEL", "/models/m")
    assert hosted_llm("http://localhost:8000/v1/").model == "/models/m"
    monkeypatch.setenv("ACCEL_HOST_LLM", "http://localhost:8000/v1=/models/x")
    assert hosted_llm("http://localhost:8000/v1").model == "/models/x"
    assert hosted_llm("http://localhost:9000/v1") is None


def test_engine_clients_wait_for_a_connection_as_long_as_the_setting_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """ACCEL_CONNECT_TIMEOUT_S: 3 s unless set; a bad value is refused with its remedy; the
    LLM, embedding and rerank server clients built without their own value follow it."""
    from accel.engines.embed_server import EmbeddingServerEngine
    from accel.engines.llm.openai_client import OpenAIServerEngine
    from accel.engines.rerank_server import RerankServerEngine

    monkeypatch.delenv("ACCEL_CONNECT_TIMEOUT_S", raising=False)
    assert Settings().connect_timeout_s == 3.0
    for bad in ("soon", "0", "-1", "nan"):
        monkeypatch.setenv("ACCEL_CONNECT_TIMEOUT_S", bad)
        with pytest.raises(ValueError, match=f"ACCEL_CONNECT_TIMEOUT_S='{bad}' is not a positive number of seconds"):
            Settings()
    monkeypatch.setenv("ACCEL_CONNECT_TIMEOUT_S", "12.5")
    assert Settings().connect_timeout_s == 12.5
    assert OpenAIServerEngine("http://server.test/v1", "m")._connect_timeout_s == 12.5
    assert EmbeddingServerEngine("http://server.test/v1")._timeout.connect == 12.5
    assert RerankServerEngine("http://server.test", "m")._timeout.connect == 12.5
    assert OpenAIServerEngine("http://server.test/v1", "m", connect_timeout_s=1.0)._connect_timeout_s == 1.0  # its own wins
