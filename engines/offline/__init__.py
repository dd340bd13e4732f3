"""Offline assets built on this machine without network: a text corpus and the models accel
needs when no real weights are configured (`python -m accel.engines.offline build-llm`)."""

from accel.engines.offline.corpus import DEFAULT_MODULES, Document, stdlib_docs

__all__ = ["DEFAULT_MODULES", "Document", "stdlib_docs"]
