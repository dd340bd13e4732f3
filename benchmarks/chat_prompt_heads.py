"""What of a chat turn's prompts vLLM already serves from its prefix cache, stock LlamaIndex alone.

Issue 12 asked to lower the condense chat engines so that their static prompt heads are
prefilled while the question rewrite decodes. This measures whether there is anything to
prefill: on a private stack (the offline "bench" model, as `accel bench` uses), it runs the
chat example's condense-plus-context engine unchanged over a few 3-turn conversations and
prints, per LLM request, its prompt tokens and the tokens vLLM found cached
(`usage.prompt_tokens_details.cached_tokens`), next to the static head (the chat template's
start and the context prompt up to `{context_str}`, in tokens) and the server's cache block
size. A head shorter than a block can never be cached, warmed or not: vLLM caches full blocks.

    python -m benchmarks.chat_prompt_heads
"""

from __future__ import annotations

import functools
import re

import httpx
import openai

from accel.examples.corpus import pydoc_documents
from accel.examples.llamaindex.chat import (
    CONTEXT_PROMPT,
    build_app,
    new_conversation,
    turns,
)
from accel.examples.llamaindex.models import build_index

from .private_stack import private_stack

QUESTIONS = ("How do I push an item onto a heap?", "How do I find the insertion point in a sorted list?",
             "What does functools.lru_cache do?", "How do I merge sorted iterables?")


def _recording(records: list[dict[str, object]]) -> None:
    """Record each chat completion's usage (the stock request goes out unchanged)."""
    create = openai.resources.chat.completions.Completions.create

    @functools.wraps(create)
    def recorded(self: object, *args: object, **kwargs: object) -> object:
        response = create(self, *args, **kwargs)
        details = response.usage.prompt_tokens_details
        system = kwargs["messages"][0]["content"]  # type: ignore[index]
        records.append({"kind": "answer" if system.startswith(CONTEXT_PROMPT[:40]) else "condense",
                        "prompt": response.usage.prompt_tokens, "cached": details.cached_tokens if details else None})
        return response

    openai.resources.chat.completions.Completions.create = recorded


def main() -> None:
    records: list[dict[str, object]] = []
    _recording(records)
    with private_stack("bench", max_tokens=32) as config:
        root = config.openai_base_url.rstrip("/").removesuffix("/v1")
        head = CONTEXT_PROMPT.split("{context_str}")[0]
        tokens = httpx.post(f"{root}/tokenize", json={"model": config.model, "add_generation_prompt": False,
                                                      "messages": [{"role": "system", "content": head}]}).json()["count"]
        metrics = httpx.get(f"{root}/metrics").text
        block = re.search(r'vllm:cache_config_info\{[^}]*\bblock_size="(\d+)"', metrics)
        print(f"static head: {tokens} tokens; cache block: {block.group(1) if block else 'not reported'} tokens")
        engine = build_app(config, build_index(config, pydoc_documents(["heapq", "bisect", "functools"]), "heads"))
        for number, question in enumerate(QUESTIONS):
            conversation = new_conversation(engine)
            for turn, message in enumerate(turns(question)):
                first = len(records)
                conversation.chat(message)
                for record in records[first:]:
                    print(f"conversation {number} turn {turn} {record['kind']:8} "
                          f"prompt {record['prompt']:5} cached {record['cached']}")


if __name__ == "__main__":
    main()
