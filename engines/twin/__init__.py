"""Engine twins: servers with a real engine's HTTP API whose time comes from a measured profile.

A twin is an instrument (docs/twins.md): it measures scheduling at GPU cost ratios on machines
without a GPU, and injects faults deterministically. Every number it produces is simulated.
"""
