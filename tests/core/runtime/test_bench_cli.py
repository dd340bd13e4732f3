"""`accel bench scheduler` through typer's CliRunner, on a small query count."""

import json

from typer.testing import CliRunner

from accel.cli.bench import bench_app, bench_template


def test_bench_template_has_50_nodes():
    assert len(bench_template()) == 50


def test_scheduler_bench_prints_a_table_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(bench_app, ["scheduler", "--json", str(out), "--queries", "50"])
    assert result.exit_code == 0, result.output
    assert "dispatch" in result.output and "instantiate" in result.output
    report = json.loads(out.read_text())
    assert report["template_nodes"] == 50
    assert report["dispatch_us_per_primitive"] > 0 and report["instantiate_ms"] > 0
    assert report["concurrent"]["queries"] == 50
    assert set(report["goals"]) == {"dispatch_us_per_primitive", "instantiate_ms"}
