"""From a twin's sampled token ids to vLLM's text, stop handling and finish reasons.

vLLM ends a request at EOS (finish_reason 'stop'), at a `stop_token_ids` id (stop_reason the id),
at a `stop` string (the text cut before it, stop_reason the string) or at `max_tokens`
('length'); while streaming it holds back text that could still become a stop string.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from accel.engines.twin.scheduler import Seq


@dataclass
class Generation:
    seq: Seq
    pieces: Sequence[str]
    """The text of each token id (special tokens: empty)."""
    stops: tuple[str, ...] = ()
    stop_ids: frozenset[int] = frozenset()
    text: str = ""
    sent: int = 0
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    tokens: list[int] = field(default_factory=list)

    def absorb(self, token: int, scheduler_finished: str | None) -> None:
        """Take one sampled token; may finish the generation."""
        if self.finish_reason is not None:
            return
        self.tokens.append(token)
        if token == self.seq.plan.eos_id:
            self.finish_reason = "stop"
            return
        if token in self.stop_ids:
            self.finish_reason, self.stop_reason = "stop", token
            return
        before = len(self.text)
        self.text += self.pieces[token]
        found = [(self.text.find(stop, max(0, before - len(stop) + 1)), stop) for stop in self.stops]
        found = [(at, stop) for at, stop in found if at >= 0]
        if found:
            at, stop = min(found)
            self.text = self.text[:at]
            self.finish_reason, self.stop_reason = "stop", stop
        elif scheduler_finished is not None:
            self.finish_reason = scheduler_finished

    def release(self) -> str:
        """Text that can be sent now: all of it once finished, else all but what could still
        begin a stop string."""
        hold = 0 if self.finish_reason is not None else max((len(stop) - 1 for stop in self.stops), default=0)
        end = max(self.sent, len(self.text) - hold)
        delta, self.sent = self.text[self.sent:end], end
        return delta
