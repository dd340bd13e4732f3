"""Pictures of p-graphs and e-graphs, annotated with the passes that produced them.

Mermaid text always (paste into docs, GitHub renders it); SVG/PNG/PDF through Graphviz `dot`
when it is installed, else through matplotlib + networkx with a layered layout by depth.
Colours follow the node kind; order edges are dashed (pinned ones dotted); streaming nodes get a
thick border; the pass notes become a caption.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

from accel.ir.errors import GraphError
from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Node

COLORS: dict[Kind, str] = {
    Kind.INPUT: "#e0e0e0",
    Kind.OUTPUT: "#e0e0e0",
    Kind.EMBED: "#8ecae6",
    Kind.INGEST: "#5fa8d3",
    Kind.SEARCH: "#219ebc",
    Kind.RERANK: "#90be6d",
    Kind.PREFILL: "#ffd166",
    Kind.PARTIAL_PREFILL: "#ffb703",
    Kind.FULL_PREFILL: "#ffd166",
    Kind.DECODE: "#f4a261",
    Kind.PARTIAL_DECODE: "#e76f51",
    Kind.CONDITION: "#cdb4db",
    Kind.AGGREGATE: "#bde0fe",
    Kind.CALL: "#f1faee",
}

IMAGE_SUFFIXES = {".svg", ".png", ".pdf"}
TEXT_SUFFIXES = {".mmd", ".md", ".mermaid", ".dot", ".gv"}


def mermaid_id(name: str) -> str:
    """A mermaid-safe id for a node name (mermaid ids cannot hold '.', '#', spaces)."""
    return "n_" + re.sub(r"[^0-9A-Za-z]", lambda m: f"_{ord(m.group()):x}_", name)


def _annotation(node: Node) -> str:
    bits = [node.kind.value + (f" @{node.engine}" if node.engine else "")]
    if node.streams:
        bits.append("streams")
    if node.map_port:
        bits.append(f"per item of {node.map_port}")
    if node.schedule.micro_batch:
        bits.append(f"micro-batch {node.schedule.micro_batch}")
    return " · ".join(bits)


def _caption(graph: Graph, width: int = 110) -> list[str]:
    passes = graph.meta.get("passes") or []
    lines = [f"passes: {', '.join(passes) if passes else 'none (p-graph)'}"]
    for note in graph.meta.get("notes") or []:
        lines += textwrap.wrap(note, width, subsequent_indent="    ")
    return lines


def to_mermaid(graph: Graph, *, title: str | None = None, prefix: str = "") -> str:
    """Mermaid flowchart text: one line per node, `-->` data edges, `-.->` order edges."""
    lines = [f"---\ntitle: {title}\n---"] if title else []
    lines.append("flowchart TB")
    lines += _mermaid_body(graph, prefix)
    lines += [f"    %% {line}" for line in _caption(graph)]
    return "\n".join(lines) + "\n"


def _mermaid_body(graph: Graph, prefix: str, indent: str = "    ") -> list[str]:
    out = []
    for node in graph.nodes():
        label = f"{node.name}<br/><small>{_annotation(node)}</small>".replace('"', "'").replace("#", "#35;")
        out.append(f'{indent}{mermaid_id(prefix + node.name)}["{label}"]:::{node.kind.value}')
    for src, dst, data in graph.edges():
        arrow = "-->" if data else "-.->"
        out.append(f"{indent}{mermaid_id(prefix + src)} {arrow} {mermaid_id(prefix + dst)}")
    used = {n.kind for n in graph.nodes()}
    out += [f"{indent}classDef {k.value} fill:{COLORS[k]},stroke:#333" for k in Kind if k in used]
    return out


def before_after_mermaid(p_graph: Graph, e_graph: Graph) -> str:
    lines = ["flowchart LR"]
    for title, graph, prefix in (("p-graph", p_graph, "p:"), ("e-graph", e_graph, "e:")):
        lines.append(f'    subgraph {mermaid_id(prefix)}["{title}"]')
        lines.append("    direction TB")
        lines += _mermaid_body(graph, prefix, indent="        ")
        lines.append("    end")
    lines += [f"    %% {line}" for line in _caption(e_graph)]
    return "\n".join(lines) + "\n"


def to_dot(graph: Graph, *, title: str | None = None, cluster: str | None = None, prefix: str = "") -> str:
    """Graphviz text; with `cluster` the nodes are wrapped in a named cluster (for side by side)."""
    body = []
    for node in graph.nodes():
        style = 'style="filled,bold", penwidth=3' if node.streams else "style=filled"
        label = f"{node.name}\\n{_annotation(node)}".replace('"', "'")
        body.append(f'  "{prefix}{node.name}" [label="{label}", fillcolor="{COLORS[node.kind]}", {style}, shape=box];')
    for src, dst, data in graph.edges():
        style = "solid" if data else ("dotted" if graph.is_pinned(src, dst) else "dashed")
        body.append(f'  "{prefix}{src}" -> "{prefix}{dst}" [style={style}];')
    caption = "\\l".join(line.replace('"', "'") for line in _caption(graph)) + "\\l"
    if cluster is not None:
        return f'subgraph "cluster_{cluster}" {{\n  label="{cluster}\\n{caption}";\n' + "\n".join(body) + "\n}"
    head = f'digraph accel {{\n  rankdir=TB; labelloc=b; labeljust=l; label="{(title + chr(92) + "n") if title else ""}{caption}";'
    return head + "\n" + "\n".join(body) + "\n}\n"


def _write_with_dot(dot_text: str, path: Path) -> None:
    subprocess.run(["dot", f"-T{path.suffix[1:]}", "-o", str(path)], input=dot_text.encode(), check=True, capture_output=True)


def _draw(ax, graph: Graph, title: str | None) -> None:
    """Layered layout: one row per depth, inputs at the top, the Output at the bottom."""
    import networkx as nx

    graph.compute_depths()
    layers: dict[int, list[str]] = {}
    for name in graph.topo_order():
        layers.setdefault(graph.node(name).depth, []).append(name)
    pos = {}
    for depth, names in layers.items():
        for i, name in enumerate(names):
            pos[name] = (i - (len(names) - 1) / 2, depth)
    g = graph.nx
    data_edges = [(s, d) for s, d, data in graph.edges() if data]
    order_edges = [(s, d) for s, d, data in graph.edges() if not data]
    common = {"ax": ax, "arrows": True, "arrowsize": 9, "node_size": 1600}
    nx.draw_networkx_edges(g, pos, edgelist=data_edges, edge_color="#555", **common)
    nx.draw_networkx_edges(g, pos, edgelist=order_edges, style="dashed", edge_color="#c00", **common)
    for node in graph.nodes():
        x, y = pos[node.name]
        box = {"boxstyle": "round,pad=0.35", "fc": COLORS[node.kind], "ec": "#000" if node.streams else "#777", "lw": 2.5 if node.streams else 0.8}
        ax.text(x, y, f"{node.name}\n{_annotation(node)}", ha="center", va="center", fontsize=6.5, bbox=box, zorder=3)
    ax.set_title(title or "", fontsize=10)
    ax.margins(x=0.25, y=0.04)
    ax.axis("off")


def _figure(graphs: list[tuple[Graph, str | None]], caption_graph: Graph):
    from matplotlib.figure import Figure

    widths = [max(_layer_sizes(g).values()) for g, _ in graphs]
    height = max(len(_layer_sizes(g)) for g, _ in graphs)
    caption = _caption(caption_graph)
    caption_in = 0.13 * len(caption) + 0.2
    fig = Figure(figsize=(max(7.0, 2.6 * sum(widths)), 0.75 * height + caption_in + 0.6))
    axes = fig.subplots(1, len(graphs), squeeze=False)[0]
    for ax, (graph, title) in zip(axes, graphs, strict=True):
        _draw(ax, graph, title)
    fig.text(0.01, 0.005, "\n".join(caption), fontsize=7, family="monospace", va="bottom")
    fig.subplots_adjust(bottom=caption_in / fig.get_figheight(), top=1 - 0.35 / fig.get_figheight(), left=0.02, right=0.98)
    return fig


def _layer_sizes(graph: Graph) -> dict[int, int]:
    graph.compute_depths()
    sizes: dict[int, int] = {}
    for node in graph.nodes():
        sizes[node.depth] = sizes.get(node.depth, 0) + 1
    return sizes


def _check_suffix(path: Path) -> None:
    if path.suffix not in IMAGE_SUFFIXES | TEXT_SUFFIXES:
        raise GraphError(None, f"cannot render to {path.name!r}", f"use one of {sorted(IMAGE_SUFFIXES | TEXT_SUFFIXES)}")


def render(graph: Graph, path: str | Path, *, title: str | None = None, use_dot: bool | None = None) -> Path:
    """Write a picture of `graph`; the format follows the suffix (.mmd/.md/.mermaid: mermaid,
    .dot/.gv: Graphviz text, .svg/.png/.pdf: an image). `use_dot=None` uses Graphviz when found."""
    path = Path(path)
    _check_suffix(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in {".mmd", ".mermaid"}:
        path.write_text(to_mermaid(graph, title=title))
    elif path.suffix == ".md":
        path.write_text(f"```mermaid\n{to_mermaid(graph, title=title)}```\n")
    elif path.suffix in {".dot", ".gv"}:
        path.write_text(to_dot(graph, title=title))
    elif _dot_available(use_dot):
        _write_with_dot(to_dot(graph, title=title), path)
    else:
        _figure([(graph, title)], graph).savefig(path, dpi=130)
    return path


def render_before_after(p_graph: Graph, e_graph: Graph, path: str | Path, *, use_dot: bool | None = None) -> Path:
    """The p-graph and the optimised e-graph side by side, captioned with the e-graph's passes."""
    path = Path(path)
    _check_suffix(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in {".mmd", ".mermaid"}:
        path.write_text(before_after_mermaid(p_graph, e_graph))
    elif path.suffix == ".md":
        path.write_text(f"```mermaid\n{before_after_mermaid(p_graph, e_graph)}```\n")
    elif path.suffix in {".dot", ".gv"} or _dot_available(use_dot):
        text = "digraph accel {\n  rankdir=TB;\n" + to_dot(p_graph, cluster="p-graph", prefix="p:") + "\n"
        text += to_dot(e_graph, cluster="e-graph", prefix="e:") + "\n}\n"
        if path.suffix in {".dot", ".gv"}:
            path.write_text(text)
        else:
            _write_with_dot(text, path)
    else:
        _figure([(p_graph, "p-graph"), (e_graph, "e-graph")], e_graph).savefig(path, dpi=130)
    return path


def _dot_available(use_dot: bool | None) -> bool:
    if use_dot is None:
        return shutil.which("dot") is not None
    if use_dot and shutil.which("dot") is None:
        raise GraphError(None, "Graphviz `dot` is not installed", "apt-get install graphviz, or pass use_dot=False")
    return use_dot
