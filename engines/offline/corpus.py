"""A fixed, offline text corpus: the pydoc pages of standard-library modules.

There is no network and no dataset on disk, yet tokenizers, BM25, embedding profiles and
benchmarks all need real prose. pydoc text is always present, varied, and (once
machine-specific details are scrubbed) identical on every machine with the same Python.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accel.engines.errors import InvalidRequest

DEFAULT_MODULES: tuple[str, ...] = (
    "abc", "argparse", "array", "base64", "bisect", "calendar", "cmd", "codecs",
    "collections", "colorsys", "contextlib", "copy", "csv", "dataclasses", "datetime",
    "decimal", "difflib", "enum", "fnmatch", "fractions", "functools", "getopt", "gettext",
    "glob", "heapq", "hmac", "html", "http.client", "ipaddress", "itertools", "json",
    "logging", "operator", "queue", "random", "sched", "shlex", "statistics", "string",
    "textwrap", "timeit", "uuid", "wave", "zipfile",
)

# Scrubbed so the text does not depend on the machine, the interpreter run or hash seeds.
_SCRUB: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r" at 0x[0-9a-fA-F]+"), ""),
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x0"),
    (re.compile(r"(?m)^FILE\n(?:    .*\n)+\n?"), ""),
    (re.compile(r"(?m)^MODULE REFERENCE\n(?:    .*\n|\n(?=    ))+\n?"), ""),
    (re.compile(r"(?:/[\w.+-]+)+/[\w.+-]+\.(?:py|so|pyc)"), "<path>"),
)
# DATA entries whose repr is a set or a dict built from a set: element order follows the hash seed.
_UNORDERED_DATA = re.compile(r"(?m)^    \w+ = (?:\{|frozenset\(|set\().*(?:\n        .*)*\n")


@dataclass(frozen=True)
class Document:
    """One corpus entry; `id` is stable across runs (the module name)."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _scrub(text: str) -> str:
    for pattern, replacement in _SCRUB:
        text = pattern.sub(replacement, text)
    return _UNORDERED_DATA.sub("", text)


# Rendered in a pristine interpreter (-I -S: no site-packages, no user env): libraries imported
# by the caller patch stdlib modules (transformers adds Logger methods), which pydoc would show.
_RENDER = (
    "import importlib, json, pydoc, sys\n"
    "names = json.loads(sys.argv[1])\n"
    "pages = [pydoc.render_doc(importlib.import_module(n), title='%s', renderer=pydoc.plaintext)"
    " for n in names]\n"
    "sys.stdout.write(json.dumps(pages))\n"
)


@functools.lru_cache(maxsize=8)
def _render(modules: tuple[str, ...]) -> tuple[str, ...]:
    env = {"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _RENDER, json.dumps(modules)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    if done.returncode != 0:
        raise InvalidRequest(
            "corpus",
            f"pydoc could not render {list(modules)}: {done.stderr.strip()[-300:]}",
            "pass importable standard-library module names",
        )
    return tuple(_scrub(page) for page in json.loads(done.stdout))


def stdlib_docs(modules: Sequence[str] = DEFAULT_MODULES) -> list[Document]:
    """One document per module, in the order given, identical across runs and callers."""
    pages = _render(tuple(modules))
    return [
        Document(id=f"stdlib:{name}", text=text, metadata={"source": "pydoc", "module": name})
        for name, text in zip(modules, pages)
    ]
