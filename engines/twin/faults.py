"""Deterministic faults for twins, installed through `POST /admin/faults`.

A script says what goes wrong and when, counted in the twin's own events (generated tokens,
requests), never in wall time, so a reliability test gets the same fault on every run:

- `die_after_tokens`: N more generated tokens, then every connection is reset and the port
  refuses connections (LLM twin);
- `stall_s`: the engine's next step (or call) starts S simulated seconds late;
- `error_on_request` (+ `error_status`, default 503): the K-th request from now is answered
  with that status, not served;
- `slow_factor`: every step or call takes F times its modelled time;
- `refuse_s`: the port refuses connections for S simulated seconds (`null` with `refuse: true`:
  until `Listener.accept()` in process).

`DELETE /admin/faults` clears the script (slowness back to 1); `GET` shows it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("accel.engines.twin.faults")


@dataclass(frozen=True)
class FaultScript:
    die_after_tokens: int | None = None
    stall_s: float | None = None
    error_on_request: int | None = None
    error_status: int = 503
    slow_factor: float = 1.0
    refuse: bool = False
    refuse_s: float | None = None

    @classmethod
    def parse(cls, data: Any) -> FaultScript:
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) - names:
            raise ValueError(f"a fault script is an object with keys among {sorted(names)}")
        script = cls(**data)
        if script.slow_factor <= 0 or (script.stall_s or 0) < 0 or (script.refuse_s or 0) < 0:
            raise ValueError("slow_factor must be positive, stall_s and refuse_s not negative")
        if not 500 <= script.error_status <= 599:
            raise ValueError("error_status must be a 5xx status")
        return script


Apply = Callable[[FaultScript], Awaitable[None]]


class Faults:
    """The installed script, the admin routes, and the middleware that fails the K-th request.
    `apply` hands the engine-side parts (tokens, stalls, slowness, refusals) to the server."""

    def __init__(self, apply: Apply) -> None:
        self.script = FaultScript()
        self._apply = apply
        self._requests = 0

    def routes(self) -> list[Route]:
        return [Route("/admin/faults", self._admin, methods=["GET", "POST", "DELETE"])]

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def failing(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and not scope["path"].startswith("/admin/"):
                self._requests += 1
                if self.script.error_on_request == self._requests:
                    log.info("twin fault: answering request %d with %d", self._requests, self.script.error_status)
                    body = {"error": {"message": "twin fault: scripted server error", "type": "InternalServerError",
                                      "code": self.script.error_status}}
                    await JSONResponse(body, self.script.error_status)(scope, receive, send)
                    return
            await app(scope, receive, send)
        return failing

    async def install(self, script: FaultScript) -> None:
        """Apply `script` (its `apply` raises ValueError for a fault this twin cannot play)."""
        await self._apply(script)
        self.script = script
        self._requests = 0
        log.info("twin fault script installed: %s", script)

    async def _admin(self, request: Request) -> Response:
        if request.method == "POST":
            try:
                await self.install(FaultScript.parse(json.loads(await request.body() or b"{}")))
            except (ValueError, TypeError) as err:
                return JSONResponse({"error": {"message": str(err), "type": "BadRequestError", "code": 400}}, 400)
        elif request.method == "DELETE":
            await self.install(FaultScript())
        return JSONResponse(asdict(self.script))
