"""What `accel bench` prints, rendered from real reports measured on this project's machine
(docs/benchmarks/*.json): the verdict first, every line within 80 columns, every system told
apart by its label and the legend, and one block per system in narrower terminals."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from accel.benchmarks import summary

DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
RUNS = ["single", "batch", "batch200", "poisson"]


def _report(run: str) -> dict[str, Any]:
    return json.loads((DOCS / f"advanced-rag-langchain-{run}.json").read_text())


@pytest.mark.parametrize("run", RUNS)
def test_the_result_fits_80_columns_and_names_every_system(run: str) -> None:
    report = _report(run)
    text = summary.render(report, width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    assert lines[0].startswith("accel ")
    assert "faster than stock" in lines[0] or "lower than stock" in lines[0]
    labels = summary.labels(list(report["systems"]))
    assert len(set(labels.values())) == len(labels)
    rows = [line.split()[0] for line in lines if line and line.split()[0] in labels.values()]
    assert set(labels.values()) <= set(rows), text
    legend = " ".join(summary.legend(report, 80).splitlines())
    for name, label in labels.items():
        assert label == name or f"{label} = {name}" in legend, (label, legend)
    assert "…" not in text  # nothing cut short


def test_nine_systems_of_a_single_run_with_ablations_read_in_full() -> None:
    text = summary.render(_report("single"), width=80)
    for label in ("stock", "llamadistpc", "accel", "accel-po", "accel-to", "no-prune", "no-stage", "no-prefill", "no-decode"):
        assert any(line.startswith(label + " ") for line in text.splitlines()), label
    assert "1.54x the critical-path bound" in text.splitlines()[0] + " " + text.splitlines()[1]


def test_a_narrow_terminal_gets_one_block_per_system() -> None:
    report = _report("single")
    text = summary.render(report, width=50)
    assert max(len(line) for line in text.splitlines()) <= 50, text
    assert "system " not in text  # no grid header
    for label in summary.labels(list(report["systems"])).values():
        assert label in text.splitlines()


def test_verdict_says_slower_and_failed_plainly() -> None:
    report = _report("single")
    slower = copy.deepcopy(report)
    slower["speedup_vs_stock"]["accel-topology"] = 0.8
    assert summary.verdict(slower).startswith("accel 1.25x slower than stock LangChain (8 queries, 100% equal answers)")
    failed = copy.deepcopy(report)
    failed["systems"]["accel-topology"]["setup_error"] = "CaptureError: no adapter\ntraceback"
    assert summary.verdict(failed) == "accel failed to start: CaptureError: no adapter"
    assert "failed: CaptureError" in summary.table(failed, 80)


def test_poisson_rates_table_has_one_row_per_system() -> None:
    report = _report("poisson")
    rates = summary.rates_table(report, 80).splitlines()
    assert rates[0].split()[-2:] == ["0.3", "0.6"]
    assert len(rates) == 1 + len(report["systems"])


def test_verdict_carries_each_ratios_spread_and_says_within_noise_when_it_covers_one() -> None:
    from accel.benchmarks.spread import mean, ratio_spread

    noisy = ratio_spread([3.0, 3.6, 3.3, 3.9], [3.5, 3.1, 3.6, 3.4], mean)
    clear = ratio_spread([3.0, 3.6, 3.3, 3.9], [2.0, 2.3, 2.2, 2.5], mean)
    assert noisy is not None and noisy["within_noise"] and noisy["low"] < 1 < noisy["high"]
    assert clear is not None and not clear["within_noise"] and clear["low"] > 1
    report = _report("single")
    report["speedup_spread"] = {"vs_stock": {"accel-topology": noisy}}
    report["bound"] = {"kind": "critical-path", "metric": "mean latency", "value_s": 1.35, "established": True,
                       "accel_over_bound": 1.54, "accel_over_bound_spread": clear, "min_s": 1.2, "median_s": 1.3, "rounds": 8}
    line = summary.verdict(report)
    assert f"faster than stock LangChain [{noisy['low']:.2f}-{noisy['high']:.2f}: within noise]" in line
    assert line.endswith(f"1.54x the critical-path bound [{clear['low']:.2f}-{clear['high']:.2f}]")
    assert "min 1.20, median 1.30 over 8 rounds" in summary.bound_line(report)


def test_a_bound_above_accel_is_never_reported_as_under_it() -> None:
    report = _report("single")
    report["lower_bound"]["accel_over_bound"] = 0.87  # a report from before the bound was checked
    line = summary.verdict(report)
    assert "critical-path bound not established" in line and "under" not in line
