"""`QueryWatcher`: what a query's caller may observe of its nodes while it runs.

Framework adapters rebuild the framework's own callback runs from these events (a LangChain
tracer sees a lowered prompt, model or retriever run as stock shows it). A query without a
watcher pays nothing; one with a watcher calls it on the session loop, synchronously, as each
event happens, so it sees them in dependency order and must return quickly.
"""

from __future__ import annotations

from typing import Any, Protocol

from accel.ir.template import Template


class QueryWatcher(Protocol):
    def finished(self, template: Template, node: str, value: Any) -> None:
        """Node `node` of `template` (the query's, or a sub-template an Expand node ran)
        produced `value` (a streamed node's items joined, as a reader of the whole sees it);
        graph inputs finish as the query starts."""

    def generated(self, template: Template, node: str, results: list[Any]) -> None:
        """Engine node `node` got `results` from its engine (a Decode's `Generation`s, whole
        even when the node streamed or parsed them)."""

    def delta(self, template: Template, node: str, text: str) -> None:
        """The next piece of text of the Decode whose text streams as the query's output."""
