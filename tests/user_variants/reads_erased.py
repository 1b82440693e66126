"""A user's variants whose operations read what ``explore``'s reduced key erases (issue 36).

Each is written as a user would write a (mistaken) patch: from ``specstate.variant`` only. Each
reads one erased field, and its bug shows only through that read, so a search that erases the
field behaves differently from the concrete one: ``tests/test_explore_reads.py`` explores each
reduced and unreduced and asks for the same verdict and counterexample length.

- ``OlderDecision``: hysteresis at the threshold that keeps "the previous decision" but reads the
  one before it (``decisions[0]`` of the two stored: an off-by-one; the reduced key keeps only the
  last). It flips between two decodes over the same rows: ``stable-switch-decision``.
- ``PrefillLeftovers``: the naive fallback once the batch shows no ``extend_lens`` (the author
  believed they are cleared after a batch's first decode; they stay until the batch is replaced,
  but the reduced key drops a decode batch's).
- ``AfterAbort``: the naive fallback once any request was aborted from the queue (reads a
  settled request's status: the reduced key settles it as ``FINISHED``).
- ``OldestFirst``: the naive fallback once request 0 has left the batch (compares ids by value:
  the symmetry reduction renumbers them).
- ``BusyTree``: the naive fallback once the radix tree's clock passes 3 (the reduced key keeps
  the access times as ranks).
- ``EveryFifthStep``: the naive fallback from the fifth action on (reads the step counter, which
  every search's key, reduced or not, used to reset).
"""

from __future__ import annotations

from specstate.variant import ReqStatus, get_variant, naive_fallback_decode, threshold_decision

_FIXED_FALLBACK = get_variant("fixed-threshold").ops().fallback_decode


def _fallback_if(bad: bool, ops, tx):  # noqa: ANN001, ANN202
    return naive_fallback_decode(ops, tx) if bad else _FIXED_FALLBACK(ops, tx)


class OlderDecision:
    """keep the previous decision at exactly the threshold (off by one: the decision before it)"""

    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805 - operations take the Ops table first
        decisions = tx.state.decisions
        if batch.batch_size == tx.config.disable_batch_threshold and decisions:
            return decisions[0].speculate  # meant: decisions[-1]
        return threshold_decision(ops, tx, batch)


class PrefillLeftovers:
    """the naive fallback once the batch shows no prefill lengths any more"""

    base = "fixed-threshold"

    def fallback_decode(ops, tx):  # noqa: N805
        return _fallback_if(not tx.state.running.extend_lens, ops, tx)


class AfterAbort:
    """the naive fallback once a request was aborted while it waited"""

    base = "fixed-threshold"

    def fallback_decode(ops, tx):  # noqa: N805
        return _fallback_if(any(r.status is ReqStatus.ABORTED for r in tx.state.reqs), ops, tx)


class OldestFirst:
    """the naive fallback once the oldest request (id 0) left the batch"""

    base = "fixed-threshold"

    def fallback_decode(ops, tx):  # noqa: N805
        return _fallback_if(0 not in tx.state.running.rids, ops, tx)


class BusyTree:
    """the naive fallback once the prefix cache was touched more than three times"""

    base = "fixed-threshold"

    def fallback_decode(ops, tx):  # noqa: N805
        return _fallback_if(tx.state.tree.clock > 3, ops, tx)


class EveryFifthStep:
    """the naive fallback from the fifth scheduler action on"""

    base = "fixed-threshold"

    def fallback_decode(ops, tx):  # noqa: N805
        return _fallback_if(tx.state.step_index >= 5, ops, tx)
