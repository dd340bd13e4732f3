"""The served model's own tokenizer, run in this process.

A prefix warm-up needs the token ids of a prompt's static head (`WarmupOp`). Asking the
server costs a `/tokenize` round trip per prompt whose head changes per query, on the server's
API process and on accel's event loop: under a Poisson load on GPU-speed engines these round
trips took ~45% of the loop's CPU (LlamaIndex advanced RAG, docs/benchmarks-twin.md). When the
server serves a model from a local directory, its tokenizer is on this machine too.

It is trusted only after it agreed with the server: `verified` tokenizes probe texts both
ways, with and without special tokens, and a tokenizer that differs on any is not used (logged
and counted in `disagreements`); the engine then keeps asking the server. A wrong id would
cost only a missed warm-up (warm-ups are accel's own requests), never a changed answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

log = logging.getLogger("accel.engines.llm.local_tokenizer")

PROBES = (
    "Answer the question using only the context below.\n\nQuestion: what is prefix caching?",
    "  leading spaces, tabs\tand\r\nline ends; Ünïcödé, 東京, émoji 🙂 and digits 1234567890",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<s></s>[INST] special-looking text [/INST]",
)
"""Texts both tokenizers must agree on: prose, whitespace and unicode edge cases, and text
that looks like special tokens (which a server may or may not parse as such)."""

disagreements: Counter[str] = Counter()
"""Models whose local tokenizer differed from the server's (the engine asks the server)."""

ServerTokenize = Callable[[str, bool], Awaitable[list[int]]]


class LocalTokenizer:
    """`tokenizers.Tokenizer` of a model directory; encoding runs on a thread of its own, off
    the event loop (a long prompt takes a few ms)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="accel-tokenize")

    @classmethod
    async def verified(cls, model: str, server: ServerTokenize) -> LocalTokenizer | None:
        """The model directory's tokenizer if it has one and it tokenizes `PROBES` as the
        server does; None otherwise."""
        path = Path(model) / "tokenizer.json"
        if not path.is_file():
            return None
        from tokenizers import Tokenizer

        loop = asyncio.get_running_loop()
        local = cls(await loop.run_in_executor(None, Tokenizer.from_file, str(path)))
        for text in PROBES:
            for special in (True, False):
                if await local.encode(text, add_special_tokens=special) != await server(text, special):
                    log.warning("the tokenizer in %s differs from the server's on %r (add_special_tokens=%s): "
                                "prefix warm-ups keep asking the server's /tokenize", model, text[:40], special)
                    disagreements[model] += 1
                    local.close()
                    return None
        return local

    async def encode(self, text: str, *, add_special_tokens: bool) -> list[int]:
        loop = asyncio.get_running_loop()
        encoding = await loop.run_in_executor(self._thread, self._tokenizer.encode, text, None, False, add_special_tokens)
        return list(encoding.ids)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
