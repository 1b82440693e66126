"""The explored multi-rank state graph as DOT and JSON, a rank disagreement drawn as such.

Owns no state. ``graph_texts(result)`` reads an ``explore_multi(..., graph=True)`` result (every
transition, nodes the classes of its key, each labelled by its ranks' waiting / running counts)
and draws:

- a plain edge per (node, node) pair, labelled with the actions that take it (``+a`` an arrival,
  ``+a@r`` one routed to rank ``r``, ``s0`` a step accepting nothing, ``sA`` one accepting
  everything);
- a **rank-disagreement edge** (``rank-collectives-agree``, ``rank-path-agrees``,
  ``rank-graph-rows``) bold red, labelled with the invariant, the ranks that disagree and what
  each laid out (``rank 0 eager 6 / ranks 1-7 graph 96``), into a red octagon (the violating
  state, terminal);
- an edge that breaks a single-rank invariant on one rank (``rank-model``) dashed red, labelled
  with the rank and the invariant.
"""

from __future__ import annotations

import json
import re
from typing import Any

from specstate.model import Arrive, Step
from specstate.multirank._routing import RoutedArrive, multi_action_to_json

__all__ = ["graph_texts", "edge_label"]

_CROSS = ("rank-collectives-agree", "rank-path-agrees", "rank-graph-rows")


def edge_label(a: Any, top: int) -> str:  # noqa: ANN401 - an action of the multi-rank alphabet
    if isinstance(a, RoutedArrive):
        return f"+a{a.arrive.max_new_tokens}@{a.rank}"
    if isinstance(a, Arrive):
        return f"+a{a.max_new_tokens}"
    if isinstance(a, Step):
        return "sA" if a.accept and a.accept[0] == top else "s0"
    return str(multi_action_to_json(a))


def _layout(text: str) -> str:
    """``target:dp-gather MAX_LEN sizes [...] own 2 (eager)`` -> ``MAX_LEN own 2 eager``."""
    m = re.search(r"(MAX_LEN|SUM_LEN|ALL_GATHER) sizes \[[^]]*\] own (\d+) \(([^)]*)\)", text)
    return f"{m.group(1)} own {m.group(2)} {m.group(3)}" if m else text[:60]


def _short(v: Any) -> str:  # noqa: ANN401 - a RankViolation
    if v.invariant == "rank-model":
        return f"rank {v.rank}: {v.field}"
    if v.invariant == "rank-collectives-agree":
        return f"{v.invariant}: rank 0 {_layout(str(v.expected))} vs rank {v.rank} {_layout(str(v.actual))}"
    return f"{v.invariant}: {v.detail or v.field}"


def _q(text: str) -> str:
    return json.dumps(text)


def graph_texts(result: Any, top: int, title: str) -> tuple[str, str, dict[str, int]]:  # noqa: ANN401
    """DOT, node-link JSON and counts (nodes, edges, disagreement edges, rank-model edges)."""
    merged: dict[tuple[int, int], dict[str, Any]] = {}
    for src, a, dst, bad in result.edges:
        e = merged.setdefault((src, dst), {"actions": [], "violations": []})
        lab = edge_label(a, top)
        if lab not in e["actions"]:
            e["actions"].append(lab)
        for v in bad[:1]:
            item = (v.invariant, _short(v))
            if item not in e["violations"]:
                e["violations"].append(item)
    bad_nodes = {dst for (_, dst), e in merged.items() if e["violations"]}
    lines = [f"digraph multirank {{", f"  label={_q(title)}; labelloc=t; rankdir=LR;",
             "  node [shape=box, fontsize=10]; edge [fontsize=9];"]
    for n, lab in sorted(result.labels.items()):
        style = ", shape=octagon, color=red" if n in bad_nodes else (", style=bold" if n == 0 else "")
        lines.append(f"  n{n} [label={_q(lab)}{style}];")
    counts = {"nodes": len(result.labels), "edges": len(merged), "disagreement_edges": 0, "rank_model_edges": 0}
    links = []
    for (src, dst), e in sorted(merged.items()):
        label = ",".join(e["actions"])
        cross = [t for inv, t in e["violations"] if inv in _CROSS]
        local = [t for inv, t in e["violations"] if inv not in _CROSS]
        if cross:
            counts["disagreement_edges"] += 1
            attrs = f"color=red, penwidth=3, label={_q(label + ' | ranks disagree: ' + cross[0][:140])}"
        elif local:
            counts["rank_model_edges"] += 1
            attrs = f"color=red, style=dashed, label={_q(label + ' | ' + local[0][:140])}"
        else:
            attrs = f"label={_q(label)}"
        lines.append(f"  n{src} -> n{dst} [{attrs}];")
        links.append({"source": src, "target": dst, "actions": e["actions"],
                      "kind": "rank-disagreement" if cross else ("rank-model" if local else "ok"),
                      "violations": [t for _, t in e["violations"]]})
    lines.append("}")
    data = {"directed": True, "multigraph": False, "graph": {"title": title},
            "nodes": [{"id": n, "label": lab, "violating": n in bad_nodes} for n, lab in sorted(result.labels.items())],
            "links": links}
    return "\n".join(lines) + "\n", json.dumps(data, indent=1, sort_keys=True) + "\n", counts
