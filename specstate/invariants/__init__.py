"""Named invariants (``always``) and witnesses (``sometimes``) over model steps."""

from specstate.invariants._core import (
    Invariant,
    Violation,
    all_invariants,
    check_outcome,
    get_invariant,
    invariant,
)
from specstate.invariants import _always  # noqa: F401  (the catalog: its checks register on import)
from specstate.invariants import _provenance  # noqa: F401  (registers after _always: registry order)
from specstate.invariants import _pages  # noqa: F401  (the KV page invariants, --page-size > 1)
from specstate.invariants._witness import WITNESSES, WitnessTracker, outcome_witnesses

__all__ = ["Invariant", "Violation", "all_invariants", "check_outcome", "get_invariant", "invariant",
           "WITNESSES", "WitnessTracker", "outcome_witnesses"]
