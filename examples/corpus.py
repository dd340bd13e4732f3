"""Documents for running an example by hand: the pydoc text of a few standard-library modules
(the benchmark harness brings its own, scrubbed, workload)."""

from __future__ import annotations

import importlib
import pydoc
from collections.abc import Iterable
from typing import Any


def pydoc_documents(modules: Iterable[str], max_chars: int = 6000) -> list[dict[str, Any]]:
    """`{"id", "text", "metadata"}` per module, the first `max_chars` of its pydoc page."""
    docs = []
    for name in modules:
        text = pydoc.render_doc(importlib.import_module(name), title="%s", renderer=pydoc.plaintext)
        docs.append({"id": f"stdlib:{name}", "text": text[:max_chars], "metadata": {"module": name}})
    return docs
