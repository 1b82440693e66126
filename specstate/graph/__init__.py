"""The transition graph a person can read (``specstate graph``).

General layout, bottom up:

- ``abstraction``: ``abstract_state`` (concrete state -> node) and ``operation`` (step ->
  edge name): the one replaceable abstraction function;
- ``transitions``: abstract transitions from the sweep exploration or from replayed runs;
- ``build``: ``AbstractGraph``, edges with counts, allowed / taken, violations, trace steps;
- ``sources``: exploration, fuzz cases, a GPU recording, a ``--trace`` overlay;
- ``render``: DOT text and node-link JSON; ``output``: files by extension, atomically,
  without ``dot`` a ``.dot`` / ``.json`` fallback; ``command``: the CLI subcommand.
"""

from specstate.graph.abstraction import (AbstractState, Abstraction, OPERATIONS, abstract_state, operation)
from specstate.graph.build import AbstractGraph, EdgeInfo
from specstate.graph.output import Written, write_graph
from specstate.graph.render import node_link_text, to_dot, to_node_link
from specstate.graph.sources import exploration_graph, fuzz_graph, overlay_trace, recording_graph
from specstate.graph.transitions import Failure, SweepBounds, Transition, explored_transitions, run_transitions

__all__ = [
    "AbstractState", "Abstraction", "OPERATIONS", "abstract_state", "operation", "AbstractGraph", "EdgeInfo",
    "Written", "write_graph", "node_link_text", "to_dot", "to_node_link", "exploration_graph", "fuzz_graph",
    "overlay_trace", "recording_graph", "Failure", "SweepBounds", "Transition", "explored_transitions",
    "run_transitions",
]
