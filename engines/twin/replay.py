"""Replayed content: a twin answers with what the real servers answered to the same request.

Validation check 1 compares a twin's timing with the real stack's. The twin's own content (hashed
vectors and scores, answer tokens drawn per prompt) sends an app down other paths than the real
models do: other chunks retrieved, other prompts, other prefix-cache hits (docs/twins.md, "Check
1"). A recording of the real run (`accel.benchmarks.content_recording`: each request the app sent
and the response it got) is loaded into the twins (`POST /admin/replay` with the file's path), and
they answer the requests it holds with the recorded content, and everything else with their own.
Timing stays the twin's model. Replay exists for that check: it never stands in for a real
engine in a benchmark, a README command or a fidelity test.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

LLM_PATHS = ("/v1/completions", "/v1/chat/completions")
EMBED_PATHS = ("/v1/embeddings",)
RERANK_PATHS = ("/rerank", "/v1/rerank", "/v2/rerank", "/score", "/v1/score")


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """A recording's records: {"path", "request", "response"} per line (JSON lines)."""
    with path.open() as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def answer_text(path: str, response: str) -> tuple[str, str | None] | None:
    """The answer's text and finish reason from a completion's response body, streamed (SSE)
    or not; None for an error or a body without one choice."""
    chat = path.endswith("/chat/completions")
    if response.lstrip().startswith("data:"):
        text, finish = [], None
        for line in response.splitlines():
            data = line.removeprefix("data:").strip()
            if not line.startswith("data:") or data == "[DONE]":
                continue
            for choice in json.loads(data).get("choices") or ():
                piece = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
                text.append(piece or "")
                finish = choice.get("finish_reason") or finish
        return "".join(text), finish
    try:
        choices = json.loads(response).get("choices")
    except ValueError:
        return None
    if not choices or len(choices) != 1:
        return None
    choice = choices[0]
    text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    return (text, choice.get("finish_reason")) if isinstance(text, str) else None


@dataclass
class LLMReplay:
    """Recorded answers by (prompt token ids, max_tokens): the key the twin computes for any
    request, whether it came as text, chat messages or token ids."""

    answers: dict[tuple[tuple[int, ...], int | None], tuple[list[int], str | None]] = field(default_factory=dict)

    @classmethod
    def load(cls, records: Iterable[dict[str, Any]], prompt_ids: Callable[[dict[str, Any], bool], list[int]],
             encode: Callable[[str], list[int]]) -> LLMReplay:
        replay = cls()
        for record in records:
            if record["path"] not in LLM_PATHS or record.get("status", 200) != 200 or not isinstance(record.get("request"), dict):
                continue
            found = answer_text(record["path"], record.get("response") or "")
            if found is None:
                continue
            chat = record["path"].endswith("/chat/completions")
            key = (tuple(prompt_ids(record["request"], chat)), _max_tokens(record["request"], chat))
            replay.answers[key] = (encode(found[0]), found[1])
        return replay

    def plan(self, prompt: list[int], body: dict[str, Any], chat: bool, eos_id: int | None) -> ReplayPlan | None:
        found = self.answers.get((tuple(prompt), _max_tokens(body, chat)))
        return None if found is None else ReplayPlan(found[0], eos_id if found[1] == "stop" else None)


def _max_tokens(body: dict[str, Any], chat: bool) -> int | None:
    value = (body.get("max_completion_tokens") if chat else None) or body.get("max_tokens")
    return None if value is None else int(value)


class ReplayPlan:
    """A recorded answer's tokens, then EOS if it stopped there (`OutputPlan`'s interface).

    An answer cut by `max_tokens` that re-encodes into fewer tokens than the real model sent
    repeats its last token up to `max_tokens`, so the twin takes the real run's decode steps."""

    def __init__(self, tokens: list[int], eos_id: int | None) -> None:
        self.tokens = tokens
        self.eos_id = eos_id

    def token(self, position: int) -> int:
        if position < len(self.tokens):
            return self.tokens[position]
        if self.eos_id is not None:
            return self.eos_id
        return self.tokens[-1] if self.tokens else 0


@dataclass
class EncoderReplay:
    """Recorded vectors by text, and recorded scores by (query, passage)."""

    vectors: dict[str, list[float]] = field(default_factory=dict)
    scores: dict[tuple[str, str], float] = field(default_factory=dict)
    lowest: dict[str, float] = field(default_factory=dict)
    """Per query, its lowest recorded score: a rerank with `top_n` records only the best."""

    def score(self, query: str, passage: str, own: Callable[[str, str], float]) -> float:
        """The recorded score; a passage the recording left out (below its `top_n`) ranks
        under every recorded one, in the twin's own order; else the twin's own score."""
        if (query, passage) in self.scores:
            return self.scores[(query, passage)]
        if query in self.lowest:
            return self.lowest[query] - 1.0 + own(query, passage)
        return own(query, passage)

    @classmethod
    def load(cls, records: Iterable[dict[str, Any]]) -> EncoderReplay:
        replay = cls()
        for record in records:
            request, path = record.get("request"), record["path"]
            if record.get("status", 200) != 200:
                continue
            try:
                response = json.loads(record.get("response") or "")
            except ValueError:
                continue
            if not isinstance(request, dict) or not isinstance(response, dict):
                continue
            if path in EMBED_PATHS:
                replay._embeddings(request, response)
            elif path in RERANK_PATHS:
                replay._scores(request, response)
        return replay

    def _embeddings(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        texts = request.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return
        for item in response.get("data") or ():
            vector = item.get("embedding")
            if isinstance(vector, str):
                raw = base64.b64decode(vector)
                vector = list(struct.unpack(f"<{len(raw) // 4}f", raw))
            self.vectors[texts[item["index"]]] = vector

    def _scores(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        if "query" in request:  # rerank: results carry each document's index
            documents = [d.get("text") if isinstance(d, dict) else d for d in request.get("documents") or ()]
            for result in response.get("results") or ():
                self._score(request["query"], documents[result["index"]], float(result["relevance_score"]))
            return
        left, right = request.get("text_1", request.get("queries")), request.get("text_2", request.get("documents"))
        left = [left] if isinstance(left, str) else left
        right = [right] if isinstance(right, str) else right
        if not isinstance(left, list) or not isinstance(right, list) or not right:
            return
        left = left * len(right) if len(left) == 1 else left
        for item in response.get("data") or ():
            self._score(left[item["index"]], right[item["index"]], float(item["score"]))

    def _score(self, query: str, passage: str, value: float) -> None:
        self.scores[(query, passage)] = value
        self.lowest[query] = min(value, self.lowest.get(query, value))


def replay_route(load: Callable[[list[dict[str, Any]] | None], int]) -> Route:
    """`POST /admin/replay {"path": recording}` loads a recording (off the event loop: it
    tokenises every recorded prompt); `DELETE` drops it. Answers how many records were taken."""

    async def admin(request: Request) -> Response:
        if request.method == "DELETE":
            load(None)
            return JSONResponse({"loaded": 0})
        try:
            path = Path((await request.json())["path"])
            records = await asyncio.to_thread(lambda: list(read_records(path)))
            taken = await asyncio.to_thread(load, records)
        except (KeyError, TypeError, ValueError, OSError) as err:
            return JSONResponse({"error": {"message": f"replay: cannot load the recording ({err})", "code": 400}}, 400)
        return JSONResponse({"loaded": taken})

    return Route("/admin/replay", admin, methods=["POST", "DELETE"])
