"""Where a run's LLM time went, step by step, on the LLM twin (`GET /admin/steps`).

An LLM step's time is the longer of reading the weights once (the profile's floor, 9.6 ms on
`h100-8b`) and computing its tokens, so the busy share alone cannot tell a well-packed run from
one that ran many under-filled steps. The twin logs each step it models; this module reads the
steps that began inside one system's measured window and says:

- `floor_s`: of the busy time, what steps paid beyond their own work (`work_s`) because they
  held too few tokens to cover the floor: time a scheduler could fill with other work for free;
- `stall_s`: how long prefill in a step held the step's decoding sequences beyond a step of
  their decodes alone: the stalls chunked prefill trades for throughput;
- the steps, those under the floor, and the sequences a decoding step held on average.

With `accel bench --steps PATH` the rows themselves are kept and drawn, a panel per system.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

log = logging.getLogger("accel.benchmarks.llm_steps")


@dataclass(frozen=True)
class StepLog:
    """The LLM twin's steps in one window, as served: rows of `fields`, and the profile's floor."""

    floor_s: float
    per_token_s: float
    fields: tuple[str, ...]
    rows: tuple[tuple[float, ...], ...]

    def column(self, name: str) -> list[float]:
        at = self.fields.index(name)
        return [row[at] for row in self.rows]

    def as_json(self) -> dict[str, Any]:
        """As the twin served it (what `from_json` reads back)."""
        return {"floor_s": self.floor_s, "per_token_s": self.per_token_s, "fields": list(self.fields),
                "steps": [list(row) for row in self.rows]}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> StepLog:
        return cls(float(body["floor_s"]), float(body["per_token_s"]), tuple(body["fields"]),
                   tuple(tuple(row) for row in body["steps"]))


def fetch(llm_base_url: str, since: float, until: float) -> StepLog | None:
    """The steps that began in [since, until) on this host's monotonic clock; None where the
    server holds no step log (a real vLLM, or a twin from before the log)."""
    url = llm_base_url.rstrip("/").removesuffix("/v1") + "/admin/steps"
    try:
        response = httpx.get(url, params={"since": since, "until": until}, timeout=30)
        response.raise_for_status()
        return StepLog.from_json(response.json())
    except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
        log.info("LLM at %s: no step log (%s); the report leaves the steps out", llm_base_url, exc)
        return None


def summarise(steps: StepLog) -> dict[str, Any]:
    """The window's steps in a few numbers (the module's docstring says what each means)."""
    seconds, work = steps.column("seconds"), steps.column("work_s")
    decodes = [d for d in steps.column("decode_seqs") if d]
    busy = sum(seconds)
    floor = sum(s - w for s, w in zip(seconds, work) if s > w)
    return {
        "steps": len(seconds),
        "busy_s": round(busy, 4),
        "under_floor_steps": sum(1 for w in work if w < steps.floor_s),
        "floor_s": round(floor, 4),
        "stall_s": round(sum(steps.column("stall_s")), 4),
        "prefill_tokens": int(sum(steps.column("prefill_tokens"))),
        "decode_tokens": int(sum(decodes)),
        "decoding_per_step": round(sum(decodes) / len(decodes), 1) if decodes else 0.0,
    }


def floor_share(system: dict[str, Any] | None) -> float | None:
    """Of a system's LLM busy time, the share its steps paid for the weights' read beyond their
    own work (None: its report holds no step summary)."""
    steps = (system or {}).get("llm_steps")
    return steps["floor_s"] / steps["busy_s"] if steps and steps["busy_s"] else None


def line(report: dict[str, Any]) -> str | None:
    """One line for the summary: each system's floor and stall time against its LLM busy time
    (None: no system's run holds a step summary)."""
    from .summary import labels

    systems = {name: s["llm_steps"] for name, s in report["systems"].items() if s.get("llm_steps")}
    if not systems:
        return None
    short = labels(list(systems))
    shown = "; ".join(
        f"{short[name]} {s['steps']} steps ({s['under_floor_steps']} under the floor), {s['decoding_per_step']:.0f} "
        f"decoding a step, floor {s['floor_s']:.2f} s and prefill stalls {s['stall_s']:.2f} s of {s['busy_s']:.2f} s"
        for name, s in systems.items())
    return f"the LLM twin's steps: {shown}"


def write(report: dict[str, Any], path: Path) -> Path | None:
    """Move every run's step rows out of `report` into `path` (JSON) and draw them beside it
    (`<stem>.png`, a panel per run); None where no run kept rows."""
    document = {label: rows for label, s in _runs(report) if (rows := s.pop("llm_step_rows", None))}
    for system in report["systems"].values():  # a Poisson report's headline repeats its highest rate's runs
        system.pop("llm_step_rows", None)
    if not document:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, separators=(",", ":")))
    title = f"{report['example']} · {report['framework']} · {report['mode']} · {report['config']['queries']} queries"
    return plot(document, path.with_suffix(".png"), title + " · simulated from measured H100 curves")


def _runs(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if report.get("rates"):
        return [(f"{name} @ {at['rate']}/s", s) for at in report["rates"] for name, s in at["systems"].items()]
    return list(report["systems"].items())


def plot(document: dict[str, dict[str, Any]], path: Path, title: str) -> Path:
    """A panel per run on one time axis: each step a bar as long as its modelled time and as
    tall as its tokens (prefill over decode), the tokens that cover the floor drawn across."""
    from accel.benchmarks.plots import plt, save

    fig, axes = plt.subplots(len(document), 1, figsize=(11, 2.6 * len(document) + 0.8), sharex=True, squeeze=False)
    for ax, (label, served) in zip(axes[:, 0], document.items()):
        steps = StepLog.from_json(served)
        start = min(steps.column("at"), default=0.0)
        at = [t - start for t in steps.column("at")]
        width, decode, prefill = steps.column("seconds"), steps.column("decode_seqs"), steps.column("prefill_tokens")
        ax.bar(at, decode, width=width, align="edge", color="#1f77b4", label="decoding sequences")
        ax.bar(at, prefill, width=width, bottom=decode, align="edge", color="#ff7f0e", alpha=0.7, label="prefill tokens")
        ax.axhline(steps.floor_s / steps.per_token_s, color="black", linestyle=":", linewidth=1,
                   label="tokens that cover the weights' read")
        summary = summarise(steps)
        ax.set_title(f"{label}: {summary['steps']} steps, floor {summary['floor_s']:.2f} s, prefill stalls "
                     f"{summary['stall_s']:.2f} s of {summary['busy_s']:.2f} s busy", fontsize=9)
        ax.set_yscale("symlog", linthresh=64)
        ax.set_ylabel("tokens in the step")
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("seconds since the system's first step in its window")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save(fig, path)
