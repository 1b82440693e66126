"""Render an explored transition graph (``explore.py``) with the graphviz package.

The ``.dot`` source is always written; ``.svg`` / ``.png`` need graphviz's ``dot`` binary
(``apt-get install -y graphviz``). Without it the ``.dot`` is written next to the requested
file and the caller is told how to render it.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx

__all__ = ["to_dot", "render"]

_FORMATS = ("svg", "png", "dot")


def to_dot(g: nx.DiGraph, *, max_labels: int = 3):  # noqa: ANN201 - graphviz.Digraph
    import graphviz

    dot = graphviz.Digraph("specstate", graph_attr={"rankdir": "LR"}, node_attr={"shape": "box", "fontsize": "9"})
    for n, data in sorted(g.nodes(data=True)):
        style = {"color": "red", "style": "filled", "fillcolor": "#ffdddd"} if data.get("violation") else {}
        if data.get("initial"):
            style = {"style": "bold"}
        dot.node(str(n), data.get("label", str(n)), **style)
    for a, b, data in sorted(g.edges(data=True), key=lambda e: (e[0], e[1])):
        labels = sorted(set(data.get("labels", [])))
        text = ", ".join(labels[:max_labels]) + (" ..." if len(labels) > max_labels else "")
        dot.edge(str(a), str(b), label=f"{text} (x{data.get('count', 1)})", fontsize="8")
    return dot


def render(g: nx.DiGraph, out: Path | str) -> tuple[Path, str]:
    import graphviz

    out = Path(out)
    fmt = out.suffix.lstrip(".")
    if fmt not in _FORMATS:
        raise ValueError(f"Expected --out ending in one of {_FORMATS} but got {out.name!r}")
    dot = to_dot(g)
    dot_path = out if fmt == "dot" else out.with_suffix(".dot")
    dot_path.write_text(dot.source)
    if fmt == "dot":
        return dot_path, f"wrote {dot_path} ({g.number_of_nodes()} nodes, {g.number_of_edges()} edges)"
    try:
        out.write_bytes(dot.pipe(format=fmt))
    except graphviz.ExecutableNotFound:
        return dot_path, (f"graphviz's 'dot' binary is missing: wrote {dot_path} only; install it "
                          f"(apt-get install -y graphviz) and run: dot -T{fmt} {dot_path} -o {out}")
    return out, f"wrote {out} and {dot_path} ({g.number_of_nodes()} nodes, {g.number_of_edges()} edges)"
