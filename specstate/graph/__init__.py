"""The transition graph a person can read (``specstate graph``).

General layout, bottom up:

- ``abstraction``: ``abstract_state`` (concrete state -> node) and ``operation`` (step ->
  edge name): the one replaceable abstraction function;
- ``transitions``: abstract transitions from the sweep exploration or from replayed runs;
- ``build``: ``AbstractGraph``, edges with counts, allowed / taken, violations, trace steps;
- ``sources``: exploration, fuzz cases, a GPU recording, a ``--trace`` overlay;
- ``render``: DOT text and node-link JSON; ``output``: files by extension, atomically,
  without ``dot`` a ``.dot`` / ``.json`` fallback. The CLI subcommand is ``specstate/cli/graph.py``.
"""

from specstate._lazy import lazy_exports

_FROM = {"abstraction": ("AbstractState", "Abstraction", "OPERATIONS", "abstract_state", "operation"),
         "build": ("AbstractGraph", "EdgeInfo"), "output": ("Written", "write_graph"),
         "render": ("node_link_text", "to_dot", "to_node_link"),
         "sources": ("exploration_graph", "fuzz_graph", "overlay_trace", "recording_graph"),
         "transitions": ("Failure", "SweepBounds", "Transition", "explored_transitions", "run_transitions")}
#: imported on first use (``specstate/_lazy.py``): ``specstate graph --help`` needs none of them
__getattr__, __dir__ = lazy_exports(__name__, {n: f"specstate.graph.{m}" for m, ns in _FROM.items() for n in ns})

__all__ = [
    "AbstractState", "Abstraction", "OPERATIONS", "abstract_state", "operation", "AbstractGraph", "EdgeInfo",
    "Written", "write_graph", "node_link_text", "to_dot", "to_node_link", "exploration_graph", "fuzz_graph",
    "overlay_trace", "recording_graph", "Failure", "SweepBounds", "Transition", "explored_transitions",
    "run_transitions",
]
