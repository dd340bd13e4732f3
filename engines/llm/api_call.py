"""OpenAI API calls forwarded as a framework's own client built them.

Engine-call capture (the floor) routes the HTTP requests of a framework's OpenAI client
(`ChatOpenAI`, LlamaIndex `OpenAILike`, ...) through the LLM engine scheduler: the request
body is the client's own, byte for byte, except for the `priority` field the scheduler adds
when the server schedules by priority; the response goes back to the client unchanged, so it
parses, retries and raises exactly as it would have.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass
class APICall:
    """One HTTP request to an OpenAI-compatible server (POST .../completions and the like)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    timeout: dict[str, float | None] | None = None
    """httpx's per-request timeout extension, as the client set it."""
    priority: int = 0
    request_id: str | None = None

    def body_with_priority(self, send_priority: bool) -> bytes:
        """The body to send: the client's own bytes, or with `priority` set when the server
        schedules by priority (a stock server rejects a non-zero priority)."""
        if not send_priority or not self.body:
            return self.body
        try:
            payload = json.loads(self.body)
        except ValueError:
            return self.body
        if not isinstance(payload, dict):
            return self.body
        payload["priority"] = self.priority
        return json.dumps(payload).encode()

    @property
    def model(self) -> str | None:
        try:
            payload = json.loads(self.body) if self.body else None
        except ValueError:
            return None
        return payload.get("model") if isinstance(payload, dict) else None


@dataclass
class APIResponse:
    """A whole response: status, headers and the decoded body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    content: bytes = b""


@dataclass
class APIChunk:
    """A streamed response piece: the first carries `head` (status and headers), then body
    bytes; the last has `finished=True` (the engine scheduler aborts unfinished streams)."""

    data: bytes = b""
    head: APIResponse | None = None
    finished: bool = False


HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host", "content-encoding"})
