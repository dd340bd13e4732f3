"""What a person reads first after `accel bench`: a one-line verdict, then a table that fits the
terminal (80 columns: short system labels with a legend, or one block per system when even
that is too wide). The full table stays in the markdown and JSON files (`report.py`).
"""

from __future__ import annotations

import textwrap
from typing import Any

from . import host_speed, llm_steps
from .systems import ACCEL, LLAMADISTPC, STOCK_CONCURRENT, STOCK_SEQUENTIAL

FRAMEWORK = {"langchain": "LangChain", "llamaindex": "LlamaIndex"}
FIXED_LABELS = {STOCK_SEQUENTIAL: "stock", STOCK_CONCURRENT: "stock-conc", LLAMADISTPC: "llamadistpc", ACCEL: "accel"}
DESCRIPTIONS = {
    STOCK_SEQUENTIAL: "stock app, one query after another",
    STOCK_CONCURRENT: "stock app, batch / gather",
    LLAMADISTPC: "LlamaDistPC-like: stock with independent modules hand-parallelised",
    ACCEL: "accel.wrap, topology-aware batching",
}
GAP = "  "


def _accel_system(report: dict[str, Any]) -> str | None:
    names = list(report["systems"])
    return ACCEL if ACCEL in names else next((n for n in names if n.startswith("accel")), None)


def _stock_reference(report: dict[str, Any]) -> tuple[str | None, str]:
    """The stock system the verdict compares with, and how to say it."""
    framework = FRAMEWORK.get(report["framework"], report["framework"])
    names = report["systems"]
    if report["mode"] != "single" and STOCK_CONCURRENT in names:
        concurrent = "batch" if report["framework"] == "langchain" else "gather"
        return STOCK_CONCURRENT, f"stock {framework} {concurrent}"
    if STOCK_SEQUENTIAL in names:
        return STOCK_SEQUENTIAL, f"stock {framework}" + ("" if report["mode"] == "single" else " one query at a time")
    return None, f"stock {framework}"


def _speedup_key(reference: str) -> str:
    return "speedup_vs_stock" if reference == STOCK_SEQUENTIAL else "speedup_vs_stock_concurrent"


def verdict(report: dict[str, Any]) -> str:
    """One line: accel against stock (ratio, queries, equal answers) and against the bound;
    a run on engine twins says first that its numbers are simulated."""
    simulated = report.get("simulated")
    if simulated:
        lag = simulated.get("twin_lag_s")
        lag_text = "" if lag is None else f", twin lag {lag:.2f} s"
        return f"SIMULATED ({simulated['label']}, twin {simulated['profile']}{lag_text}): " + _verdict(report)
    return _verdict(report)


def _verdict(report: dict[str, Any]) -> str:
    name = _accel_system(report)
    queries = report["config"]["queries"]
    if name is None:
        return f"no accel system in this run ({_queries(queries)})"
    summary = report["systems"][name]
    who = "accel" if name == ACCEL else name
    if summary["setup_error"]:
        return f"{who} failed to start: {summary['setup_error'].splitlines()[0][:120]}"
    reference, phrase = _stock_reference(report)
    ratio = report[_speedup_key(reference)].get(name) if reference else None
    equal = summary["equal_rate"]
    facts = f"{_queries(queries)}, " + ("answers not compared" if equal is None else f"{equal:.0%} equal answers")
    if summary["failed_queries"]:
        facts += f", {summary['failed_queries']} failed"
    spread = ((report.get("speedup_spread") or {}).get(SPREAD_KEY.get(reference or "", "")) or {}).get(name)
    if ratio is None:
        head = f"{who}: no comparison with {phrase}"
    elif report["mode"] == "poisson":
        rate = max((at["rate"] for at in report.get("rates") or []), default=None)
        head = (f"{who} p95 latency {_times(ratio, 'lower', 'higher')} than {phrase}" + (f" at {rate:g} q/s" if rate else "")
                + _noise(spread, ratio))
    else:
        head = f"{who} {_times(ratio, 'faster', 'slower')} than {phrase}" + _noise(spread, ratio)
    return f"{head} ({facts}); {_bound_phrase(_bound(report))}"


SPREAD_KEY = {STOCK_SEQUENTIAL: "vs_stock", STOCK_CONCURRENT: "vs_stock_concurrent"}


def _noise(spread: dict[str, Any] | None, ratio: float, invert: bool = True) -> str:
    """The ratio's run-to-run spread over the run's rounds, as shown (a ratio below 1 is shown
    inverted: "1.25x slower"), and "within noise" when it covers 1.0."""
    if not spread:
        return ""
    if spread["rounds"] <= 1:
        return " [one round: no spread]"
    low, high = spread["low"], spread["high"]
    if invert and ratio < 1:
        low, high = 1 / high, 1 / low
    return f" [{low:.2f}-{high:.2f}" + (": within noise]" if spread["within_noise"] else "]")


def _bound(report: dict[str, Any]) -> dict[str, Any] | None:
    """The run's bound; reports written before every mode had one carry only the critical path."""
    if report.get("bound"):
        return report["bound"]
    critical = report.get("lower_bound") or {}
    if report["mode"] == "single" and critical.get("mean_s"):
        return {"kind": "critical-path", "metric": "mean latency", "value_s": critical["mean_s"],
                "accel_over_bound": critical.get("accel_over_bound")}
    return None


def _queries(n: int) -> str:
    return f"{n} query" if n == 1 else f"{n} queries"


def _times(ratio: float, better: str, worse: str) -> str:
    return f"{ratio:.2f}x {better}" if ratio >= 1 else f"{1 / ratio:.2f}x {worse}"


def _bound_phrase(bound: dict[str, Any] | None) -> str:
    """accel / bound with its spread; a bound above a measured system is no bound at all."""
    if not bound or bound.get("value_s") is None:
        return f"no {bound['kind'] if bound else 'lower'} bound measured"
    ratio = bound.get("accel_over_bound")
    if bound.get("established") is False or (ratio is not None and ratio < 1):  # reports before the check: ratio < 1
        return f"{bound['kind']} bound not established ({_violation(bound)})"
    if ratio is None:
        return f"no accel / {bound['kind']} bound ratio"
    return f"{ratio:.2f}x the {bound['kind']} bound" + _noise(bound.get("accel_over_bound_spread"), ratio, invert=False)


def _violation(bound: dict[str, Any]) -> str:
    """Why the bound does not hold: the first system it came out above."""
    found = bound.get("violations") or []
    if not found:
        return f"{bound['value_s']:.2f} s, above accel's measurement"
    first = found[0]
    after = f" after {bound['remeasured']} re-measurement{'s' if bound['remeasured'] != 1 else ''}" if bound.get("remeasured") else ""
    return f"{first['bound_s']:.2f} s measured, above {first['system']}'s {first['measured_s']:.2f} s{after}"


def labels(names: list[str]) -> dict[str, str]:
    """Short, distinct labels: stock, stock-conc, llamadistpc, accel, accel-po, no-prefill, ..."""
    out: dict[str, str] = {}
    for name in names:
        label = FIXED_LABELS.get(name)
        if label is None and name.startswith("accel-no-"):
            label = "no-" + name.removeprefix("accel-no-").split("_")[0]
        label = label or name
        out[name] = label if label not in out.values() else name
    return out


def _num(value: float | None, fmt: str) -> str:
    return "—" if value is None else fmt.format(value)


def _columns(report: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(header, format, getter) per column of this mode."""
    names = report["systems"]
    cols: list[tuple[str, str, Any]] = []
    if report["mode"] == "batch":
        cols.append(("makespan s", "{:.2f}", lambda n, s: s["makespan_s"]))
    else:
        cols.append(("mean s", "{:.2f}", lambda n, s: (s["latency"] or {}).get("mean")))
        cols.append(("p95 s", "{:.2f}", lambda n, s: (s["latency"] or {}).get("p95")))
    cols.append(("q/s", "{:.3f}", lambda n, s: s["throughput_qps"]))
    for header, key, base in (("vs stock", "speedup_vs_stock", STOCK_SEQUENTIAL),
                              ("vs conc", "speedup_vs_stock_concurrent", STOCK_CONCURRENT),
                              ("vs LDPC", "speedup_vs_llamadistpc", LLAMADISTPC)):
        if base in names:
            cols.append((header, "{:.2f}x", lambda n, s, key=key: report[key].get(n)))
    cols.append(("equal", "{:.0%}", lambda n, s: s["equal_rate"]))
    return cols


def _rows(report: dict[str, Any], names: dict[str, str]) -> list[tuple[str, list[str]]]:
    cols = _columns(report)
    rows = []
    for name, summary in report["systems"].items():
        if summary["setup_error"]:
            rows.append((names[name], ["failed: " + summary["setup_error"].split(":")[0]]))
            continue
        rows.append((names[name], [_num(get(name, summary), fmt) for _, fmt, get in cols]))
    return rows


def table(report: dict[str, Any], width: int = 80) -> str:
    """The headline table in `width` columns: a grid when it fits, else one block per system."""
    names = labels(list(report["systems"]))
    cols = _columns(report)
    rows = _rows(report, names)
    first = max(len("system"), *(len(label) for label, _ in rows))
    widths = [max([len(h), *(len(cells[i]) for _, cells in rows if len(cells) == len(cols))]) for i, (h, _, _) in enumerate(cols)]
    grid_width = first + sum(len(GAP) + w for w in widths)
    if grid_width > width:
        return _vertical(rows, cols, width)
    lines = ["system".ljust(first) + "".join(GAP + h.rjust(w) for (h, _, _), w in zip(cols, widths))]
    for label, cells in rows:
        if len(cells) != len(cols):
            lines.append(label.ljust(first) + GAP + cells[0][: width - first - len(GAP)])
            continue
        lines.append(label.ljust(first) + "".join(GAP + c.rjust(w) for c, w in zip(cells, widths)))
    return "\n".join(lines)


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))


def _vertical(rows: list[tuple[str, list[str]]], cols: list[tuple[str, str, Any]], width: int) -> str:
    lines = []
    for label, cells in rows:
        lines.append(label)
        facts = cells if len(cells) != len(cols) else [f"{h} {c}" for (h, _, _), c in zip(cols, cells)]
        lines += textwrap.wrap(" · ".join(facts), width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(lines)


def rates_table(report: dict[str, Any], width: int = 80) -> str:
    """Poisson runs: p95 latency of each system (rows) per request rate (columns), bound last."""
    rates = report.get("rates") or []
    if not rates:
        return ""
    names = labels(list(report["systems"]))
    first = max(len("p95 s at q/s"), *(len(v) for v in names.values()), len("bound"))
    header = "p95 s at q/s".ljust(first) + "".join(GAP + f"{at['rate']:g}".rjust(6) for at in rates)
    lines = [header]
    for name, label in names.items():
        cells = [_num(((at["systems"].get(name) or {}).get("latency") or {}).get("p95"), "{:.2f}") for at in rates]
        lines.append(label.ljust(first) + "".join(GAP + c.rjust(6) for c in cells))
    if any(at.get("bound_p95_s") for at in rates):
        lines.append("bound".ljust(first) + "".join(GAP + _num(at.get("bound_p95_s"), "{:.2f}").rjust(6) for at in rates))
    if len(header) > width:  # many rates: one line per system instead
        return "\n".join(textwrap.shorten(line, width, placeholder=" …") for line in lines)
    return "\n".join(lines)


def bound_line(report: dict[str, Any]) -> str:
    """The bound's value, its spread over the bound's rounds, or why it is not established."""
    bound = _bound(report) or {}
    if bound.get("value_s") is None:
        return ""
    what = {"mean latency": "mean per query", "makespan": "makespan", "p95 latency": "p95 at the highest rate"}
    stat = what.get(bound["metric"], bound["metric"])
    if bound.get("rounds"):
        stat += f"; min {bound['min_s']:.2f}, median {bound['median_s']:.2f} over {bound['rounds']} rounds"
    floor = (report.get("capacity_bound") or {}).get("step_floor")
    if floor:
        stat += f"; never below the LLM's step floor, {floor['value_s']:.2f} s"
    if bound.get("established") is False:
        return f"{bound['kind']} bound not established: {_violation(bound)} ({stat})"
    return f"{bound['kind']} bound: {bound['value_s']:.2f} s ({stat})"


def legend(report: dict[str, Any], width: int = 80) -> str:
    """What the short labels and the ratio columns mean, wrapped to `width`."""
    names = labels(list(report["systems"]))
    parts = [f"{label} = {name}" for name, label in names.items() if label != name]
    ratio = {"single": "mean latency", "batch": "makespan", "poisson": "p95 latency"}[report["mode"]]
    columns = {header for header, _, _ in _columns(report)}
    short = [text for header, text in (("vs conc", "conc = stock-concurrent"), ("vs LDPC", "LDPC = llamadistpc"))
             if header in columns]
    text = "; ".join(parts + short)
    text += (f". vs X: X's {ratio} over the system's (above 1x: faster than X). "
             f"equal: same answers as {report.get('equality_reference') or '—'}.")
    return "\n".join(textwrap.wrap(text.lstrip(". "), width, break_on_hyphens=False))


def encoder_requests_line(report: dict[str, Any]) -> str | None:
    """HTTP requests each system sent to the encoder servers (batch / Poisson, server encoders)."""
    sent = {name: s.get("encoder_requests") for name, s in report["systems"].items() if s.get("encoder_requests")}
    if not sent:
        return None
    servers = sorted({server for counts in sent.values() for server in counts})
    short = labels(list(sent))
    shown = "; ".join(f"{short[name]} {' / '.join(str(counts.get(server, 0)) for server in servers)}"
                      for name, counts in sent.items())
    return f"requests to the {' / '.join(servers)} servers: {shown}"


def index_line(report: dict[str, Any]) -> str | None:
    """Said only when the index holds chunks of the same text: their order in a search can
    differ between runs, and with it any prompt that lists them (None: no such ties)."""
    index = report.get("index") or {}
    shared = index.get("shared_text_chunks")
    if not shared:
        return None
    return (f"index: {shared} of {index['chunks']} chunks share their text with another; a search returns them at equal "
            "distances in Postgres's row order, which can differ between runs (a run's systems share one index)")


def front_end_line(report: dict[str, Any]) -> str | None:
    """CPU time this process spent per query, per system, and where one front-end saturates."""
    spent = {name: s["front_end"] for name, s in report["systems"].items() if s.get("front_end")}
    if not spent:
        return None
    short = labels(list(spent))
    shown = "; ".join(
        f"{short[name]} {f['process_cpu_ms_per_query']:.1f}"
        + (f" (loop {f['loop_cpu_ms_per_query']:.1f})" if f.get("loop_cpu_ms_per_query") is not None else "")
        + (f", {f['saturates_at_qps']:.0f} q/s" if f.get("saturates_at_qps") else "")
        + (f", app loop busy {f['app_loop_busy_s']:.2f} s" if f.get("app_loop_busy_s") is not None else "")
        for name, f in spent.items())
    encoders = " incl. in-process encoders" if any(f["includes_in_process_encoders"] for f in spent.values()) else ""
    return f"front-end CPU ms/query{encoders}, and one process's saturation: {shown}"


def headline(report: dict[str, Any], system: str) -> float | None:
    """A system's headline: makespan in batch mode, mean latency in single mode, p95 in Poisson
    mode (stock-sequential's mean in batch mode is one query's latency, not the batch's)."""
    entry = report["systems"].get(system) or {}
    if report["mode"] == "batch":
        return entry.get("makespan_s")
    return (entry.get("latency") or {}).get("p95" if report["mode"] == "poisson" else "mean")


def front_end_cpu_ms(system: dict[str, Any] | None) -> float | None:
    """This machine's CPU per query under a system (its process's, `front_end`): on twins the
    engines model a GPU, so what else a run takes is the front end, and it differs by machine."""
    return ((system or {}).get("front_end") or {}).get("process_cpu_ms_per_query")


def twin_cpu_ms(system: dict[str, Any] | None, queries: int) -> float | None:
    """The twins' own process CPU per query under a system (its report's `twin_cpu_s`): the
    modelled GPU servers' host work, done on this machine's cores beside the app."""
    spent = (system or {}).get("twin_cpu_s")
    return None if spent is None or not queries else 1000 * spent / queries


def twin_cpu_line(report: dict[str, Any]) -> str | None:
    """`twin_cpu_ms` per system (None: not a run on twins)."""
    queries = report["config"]["queries"]
    spent = {name: ms for name, s in report["systems"].items() if (ms := twin_cpu_ms(s, queries)) is not None}
    if not spent:
        return None
    short = labels(list(spent))
    shown = "; ".join(f"{short[name]} {ms:.1f}" for name, ms in spent.items())
    return f"the twins' own CPU ms/query, on this machine beside the app: {shown}"


def twin_busy_share(system: dict[str, Any] | None, twin: str = "llm") -> float | None:
    """A twin's (the LLM's by default) modelled busy time over a system's run (its report's
    `twin_busy_s`): near 1, the run left that engine no idle time and its own work decides it."""
    busy, span = ((system or {}).get("twin_busy_s") or {}).get(twin), (system or {}).get("makespan_s")
    return busy / span if busy is not None and span else None


def twin_busy_line(report: dict[str, Any]) -> str | None:
    """Each twin's modelled busy time under each system, and its share of the system's run (the
    makespan; a Poisson run's whole span): what the run left the engine idle is time it waited
    on the front end or on another engine. None: not a run on twins, or twins without the
    counter."""
    systems = {name: s for name, s in report["systems"].items() if s.get("twin_busy_s") and s.get("makespan_s")}
    if not systems:
        return None
    short = labels(list(systems))
    engines = [twin for twin in ("llm", "embed", "rerank") if any(twin in s["twin_busy_s"] for s in systems.values())]

    def one(name: str, twin: str) -> str:
        spent = systems[name]["twin_busy_s"]
        steps = f", {spent['llm_steps']:.0f} steps" if twin == "llm" and "llm_steps" in spent else ""
        return f"{short[name]} {spent[twin]:.2f} ({twin_busy_share(systems[name], twin):.0%}{steps})"

    def engine(twin: str) -> str:
        return ("LLM " if twin == "llm" else f"{twin} ") + ", ".join(
            one(name, twin) for name, s in systems.items() if twin in s["twin_busy_s"])

    shown = "; ".join(engine(twin) for twin in engines)
    return f"the twins' modelled busy s (share of the run): {shown}"


def render(report: dict[str, Any], width: int = 80) -> str:
    """Verdict, a context line, the table, the bound, the legend: every line at most `width`."""
    machine = report["machine"]
    engines = report.get("engines") or {}
    encoders = " · server encoders" if engines.get("embed_server") or engines.get("rerank_server") else ""
    context = (f"{report['example']} · {report['framework']} · {report['mode']} · {_queries(report['config']['queries'])}"
               f"{encoders} · {machine['cpus']} cores, load {machine['load_average_1m_at_start']:.1f} at start"
               f" · {host_speed.describe(machine.get('host_speed'))}")
    parts = [_wrap(report.get("verdict") or verdict(report), width), "", _wrap(context, width), table(report, width)]
    if report.get("rates"):
        parts += ["", rates_table(report, width)]
    line = bound_line(report)
    if line:
        parts.append(_wrap(line, width))
    if line := encoder_requests_line(report):
        parts.append(_wrap(line, width))
    if line := front_end_line(report):
        parts.append(_wrap(line, width))
    if line := index_line(report):
        parts.append(_wrap(line, width))
    if line := twin_cpu_line(report):
        parts.append(_wrap(line, width))
    if line := twin_busy_line(report):
        parts.append(_wrap(line, width))
    if line := llm_steps.line(report):
        parts.append(_wrap(line, width))
    failures = [f"{name}: {s['failed_queries']} failed queries, first: {s['errors'][0]}"
                for name, s in report["systems"].items() if s["failed_queries"]]
    parts += [textwrap.shorten(f, width, placeholder=" …") for f in failures]
    parts += ["", legend(report, width)]
    return "\n".join(parts)
