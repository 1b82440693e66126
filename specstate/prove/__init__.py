"""``specstate prove``: the shape invariants at every batch size up to a bound, under every
capture list of the proof, by running one representative of each class of transitions at each
batch size (``docs/prove.md``).

General layout: ``_abstraction.py`` (what of a batch size the shapes depend on: its class,
the class representatives, the capture lists), ``_scripts.py`` (the transitions run at one
bound, as trees of the model's own actions), ``_prove.py`` (running them, the result),
``specstate/cli/prove.py`` (the ``specstate prove`` subcommand).
"""

from specstate._lazy import lazy_exports

_FROM = {"_abstraction": ("CAPTURE_LIST_NAMES", "BsClass", "bs_class", "capture_lists", "representatives"),
         "_prove": ("Failure", "ListVerdict", "ProveResult", "prove", "prove_config"), "_scripts": ("Lengths",)}
#: imported on first use (``specstate/_lazy.py``): ``specstate prove --help`` needs none of them
__getattr__, __dir__ = lazy_exports(__name__, {n: f"specstate.prove.{m}" for m, ns in _FROM.items() for n in ns})

__all__ = ["CAPTURE_LIST_NAMES", "BsClass", "bs_class", "capture_lists", "representatives", "Failure", "ListVerdict",
           "ProveResult", "prove", "prove_config", "Lengths"]
