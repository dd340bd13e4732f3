"""Pieces both framework adapters share: engine binding, request recording, explain()."""
