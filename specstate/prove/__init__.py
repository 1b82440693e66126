"""``specstate prove``: the shape invariants at every batch size up to a bound, under every
capture list of the proof, by running one representative of each class of transitions at each
batch size (``docs/prove.md``).

General layout: ``_abstraction.py`` (what of a batch size the shapes depend on: its class,
the class representatives, the capture lists), ``_scripts.py`` (the transitions run at one
bound, as trees of the model's own actions), ``_prove.py`` (running them, the result),
``command.py`` (the ``specstate prove`` subcommand).
"""

from specstate.prove._abstraction import CAPTURE_LIST_NAMES, BsClass, bs_class, capture_lists, representatives
from specstate.prove._prove import Failure, ListVerdict, ProveResult, prove, prove_config
from specstate.prove._scripts import Lengths

__all__ = ["CAPTURE_LIST_NAMES", "BsClass", "bs_class", "capture_lists", "representatives", "Failure", "ListVerdict",
           "ProveResult", "prove", "prove_config", "Lengths"]
