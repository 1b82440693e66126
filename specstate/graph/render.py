"""Drawing an :class:`~specstate.graph.build.AbstractGraph`: DOT text, node-link JSON, and
``.svg`` / ``.png`` through graphviz's ``dot``.

The DOT text is built here, sorted, so the same graph gives byte-identical ``.dot`` and
``.json``. Columns (``rank=same``) are the batch-size buckets, left to right; failures sit in
the last column. Colours: node fill = speculation on (green) / off (orange) / not yet decided
(white); edge colour = operation; **red** = an invariant failed (the label names it and, for a
crash, the torch error's sizes); **bold with #n** = the ``--trace`` path in step order;
**dashed** = the exploration allows it but no input run took it. A legend is drawn in the
picture itself.
"""

from __future__ import annotations

import json
from typing import Any

import networkx as nx

from specstate.graph.abstraction import BATCH_BUCKETS, OPERATIONS, AbstractState
from specstate.graph.build import AbstractGraph, EdgeInfo, EdgeKey, node_order
from specstate.graph.transitions import Failure

__all__ = ["to_dot", "to_node_link", "OP_COLOURS", "RED", "steps_label"]

RED = "#d62728"
OP_COLOURS = {
    "arrive": "#7f7f7f", "prefill": "#1f77b4", "decode-spec": "#2ca02c", "decode-fallback": "#e67e00",
    "finish": "#444444", "retract": "#8c564b", "cross-up": "#9467bd", "cross-down": "#17a2b8", "idle": "#b0b0b0",
}
_FILL = {"on": "#e5f5e0", "off": "#fde9d0", "-": "#ffffff"}
_FONT = "Helvetica"
_ARROW = "&#9472;&#9472;&#9654;"


def _q(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(**kw: str) -> str:
    return "[" + " ".join(f"{k}={v if v.startswith('<') else _q(v)}" for k, v in kw.items()) + "]"


def steps_label(steps: list[int], most: int = 4) -> str:
    """``[1, 2, 3, 7]`` -> ``#1-#3, #7`` (runs compressed; long lists shortened)."""
    runs: list[tuple[int, int]] = []
    for s in sorted(steps):
        if runs and s == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], s)
        else:
            runs.append((s, s))
    parts = [f"#{a}" if a == b else f"#{a}-#{b}" for a, b in runs]
    if len(parts) > most:
        parts = parts[: most - 1] + ["...", parts[-1]]
    return ", ".join(parts)


def _edge_label(op: str, e: EdgeInfo) -> str:
    lines = [f"{op} x{e.count}" if e.count else (op if e.trace_steps else f"{op} (untaken)")]
    if e.trace_steps:
        lines.insert(0, steps_label(e.trace_steps))
    if e.violations:
        crash = [v for v in e.violations if v.startswith("worker-crash")]
        first = crash[0] if crash else e.violations[0]
        more = len(e.violations) - 1
        lines.append("FAILS " + first + (f" (+{more} more)" if more else ""))
    return "\n".join(lines)


def _edge_line(key: EdgeKey, e: EdgeInfo) -> str:
    src, op, dst = key
    colour = RED if e.violations else OP_COLOURS.get(op, "#000000")
    kw = {"label": _edge_label(op, e), "color": colour, "fontcolor": RED if e.violations else "#333333"}
    style = []
    if not e.taken:
        style.append("dashed")
    if e.trace_steps:
        style.append("bold")
        kw["penwidth"] = "3.5"
    elif e.violations:
        kw["penwidth"] = "2.5"
    if style:
        kw["style"] = ",".join(style)
    return f"  {_q(src)} -> {_q(dst)} {_attrs(**kw)};"


def _node_line(key: str, n: AbstractState | Failure, initial: bool) -> str:
    if isinstance(n, Failure):
        kw = {"label": "FAILS\n" + "\n".join(n.invariants), "color": RED, "fontcolor": RED, "fillcolor": "#ffdede",
              "penwidth": "2.5", "style": "filled,bold"}
    else:
        kw = {"label": n.label(), "fillcolor": _FILL.get(n.spec, "#ffffff"), "style": "rounded,filled"}
        if initial:
            kw["peripheries"] = "2"
    return f"  {_q(key)} {_attrs(**kw)};"


def _legend(g: AbstractGraph) -> list[str]:
    cfg = g.config
    from specstate.graph.abstraction import threshold
    from specstate.model.families import get_family

    thr = threshold(cfg, get_family(g.family) if g.family is not None else None)
    t = "none" if thr is None else str(thr)
    rows = [f'<tr><td colspan="2"><b>{_html(g.title)}</b></td></tr>',
            f'<tr><td colspan="2">T = {t}, largest capture size = {max(cfg.cuda_graph_bs)}</td></tr>']
    rows += [f'<tr><td colspan="2">{_html(n)}</td></tr>' for n in g.notes]
    rows += [f'<tr><td><font color="{OP_COLOURS[op]}"><b>{_ARROW}</b></font></td><td align="left">{op}</td></tr>'
             for op in OPERATIONS]
    rows += [f'<tr><td><font color="{RED}"><b>{_ARROW}</b></font></td><td align="left">'
             f'<font color="{RED}">red: an invariant fails (named; torch error sizes)</font></td></tr>',
             '<tr><td><b>#n</b></td><td align="left">bold, numbered: the --trace path in step order</td></tr>',
             '<tr><td>- - &#9654;</td><td align="left">dashed: allowed by the model, taken by no input run</td></tr>',
             f'<tr><td bgcolor="{_FILL["on"]}"> </td><td align="left">node: speculation on</td></tr>',
             f'<tr><td bgcolor="{_FILL["off"]}"> </td><td align="left">node: speculation off</td></tr>',
             '<tr><td>( )</td><td align="left">double border: start state</td></tr>']
    table = '<<table border="0" cellborder="0" cellspacing="1">' + "".join(rows) + "</table>>"
    return ['  subgraph cluster_legend {', '    label="legend"; fontname="Helvetica"; color="#999999";',
            f'    legend [shape=plaintext fontsize=10 label={table}];', '  }']


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_dot(g: AbstractGraph) -> str:
    """The DOT source (deterministic: sorted nodes and edges)."""
    lines = ["digraph specstate {",
             f'  graph [rankdir="LR" fontname="{_FONT}" nodesep="0.35" ranksep="1.1" newrank="true"];',
             f'  node [shape="box" fontname="{_FONT}" fontsize="11"];',
             f'  edge [fontname="{_FONT}" fontsize="9" arrowsize="0.7"];']
    nodes = sorted(g.nodes.items(), key=lambda kv: node_order(kv[1]))
    lines += [_node_line(k, n, k == g.initial) for k, n in nodes]
    columns = [[k for k, n in nodes if (isinstance(n, Failure) and bucket == "FAIL")
                or (isinstance(n, AbstractState) and n.batch == bucket)] for bucket in BATCH_BUCKETS + ("FAIL",)]
    columns = [c for c in columns if c]
    lines += ["  { rank=same; " + " ".join(_q(k) + ";" for k in c) + " }" for c in columns]
    lines += [f"  {_q(a[0])} -> {_q(b[0])} [style=invis weight=5];" for a, b in zip(columns, columns[1:])]
    lines += [_edge_line(k, e) for k, e in sorted(g.edges.items())]
    lines += _legend(g)
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_node_link(g: AbstractGraph) -> dict[str, Any]:
    """networkx node-link data (a ``MultiDiGraph``: one edge per operation between two nodes)."""
    nxg = nx.MultiDiGraph(title=g.title, notes=list(g.notes))
    for k, n in sorted(g.nodes.items(), key=lambda kv: node_order(kv[1])):
        attrs: dict[str, Any] = ({"failure": True, "invariants": list(n.invariants)} if isinstance(n, Failure)
                                 else {"failure": False, **{f: getattr(n, f) for f in n.__dataclass_fields__}})
        nxg.add_node(k, label=n.key if isinstance(n, Failure) else n.label(), initial=k == g.initial, **attrs)
    for (src, op, dst), e in sorted(g.edges.items()):
        nxg.add_edge(src, dst, key=op, op=op, count=e.count, allowed=e.allowed, taken=e.taken,
                     violations=list(e.violations), trace_steps=list(e.trace_steps))
    return nx.node_link_data(nxg, edges="links")


def node_link_text(g: AbstractGraph) -> str:
    return json.dumps(to_node_link(g), indent=1, sort_keys=True) + "\n"


__all__ += ["node_link_text"]
