"""Multi-rank policies: who decides whether a decode iteration speculates, and what idle ranks do.

A policy names the single-rank variant every rank runs (its operations decide, fall back and
crash exactly as they do on one rank) and, on top, how the speculate / plain decision is
taken across ranks:

- *local* (``decide`` is ``None``): each rank's own ``decide_speculation`` on its own batch, as
  the project's single-rank patches do (``naive-threshold``, ``fixed-threshold``); idle ranks run
  upstream's idle speculative path (``eagle_worker.py::EAGLEWorker.draft`` on an idle batch ->
  ``eagle_info.py::EagleVerifyInput.create_idle_input(..., draft_token_num)`` -> ``verify``).
- *agreed*: one decision from the gathered ``SyncRecord`` (the same on every rank, since every
  rank reads the same gather), forced onto every busy rank's worker; ``idle_follows``: idle ranks
  take the agreed path too (a plain IDLE forward, eager); ``extend_first``: the decision is
  tested only after ``is_extend_in_batch`` (``EAGLEWorker.forward_batch_generation`` routes any
  batch with ``is_extend_in_batch`` to ``forward_target_extend`` first).

``dp-agreed-threshold`` is the corrected multi-rank patch (every-rank.md §5, §8): speculate iff
every rank's own batch is within the threshold (``max(global_num_tokens) <= threshold``, i.e. the
minimum of the ranks' wishes, the shape of sglang PR #35898's consensus over the existing gather),
applied on idle ranks, ``is_extend_in_batch`` first. ``dp-consensus-min`` is sglang PR #35898's
consensus (open; "Agree on the tier across ranks using the MLP-sync all_gather that already runs":
each rank appends its desired ``num_steps``, idle ranks a sentinel, ``min`` over the column,
written to ``batch_to_gather``, so idle ranks follow), judged on the 0.5.12 model as a policy:
two tiers (speculate, plain), since 0.5.12 has no adaptive tiers and the overlap releases are not
composed on several ranks. The others are the ways it goes wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specstate.errors import UnknownName
from specstate.multirank._records import SyncRecord

__all__ = ["MultiPolicy", "POLICIES", "get_policy", "policy_names"]

Decide = Callable[[SyncRecord, "int | None"], bool]


def _within_max(sync: SyncRecord, threshold: int | None) -> bool:
    return threshold is None or max(sync.global_num_tokens) <= threshold


def _consensus_min(sync: SyncRecord, threshold: int | None) -> bool:
    """sglang PR #35898's consensus, on the 0.5.12 model's two tiers: each rank with a batch votes the
    steps it wants (any > 0 within the threshold, 0 above it: the plain decode), an idle rank the
    sentinel (no vote); the tier is the ``min`` of the gathered column."""
    if threshold is None:
        return True
    votes = [1 if e.num_tokens <= threshold else 0 for e in sync.entries if e.forward_mode != "NONE"]
    return min(votes, default=1) > 0


def _within_sum(sync: SyncRecord, threshold: int | None) -> bool:
    return threshold is None or sum(sync.global_num_tokens) <= threshold


@dataclass(frozen=True)
class MultiPolicy:
    name: str
    base: str  #: the single-rank variant every rank runs
    summary: str
    decide: Decide | None = None  #: ``None``: each rank decides locally
    idle_follows: bool = False  #: idle ranks take the agreed path
    extend_first: bool = True  #: ``is_extend_in_batch`` tested before the decision
    correct: bool = False


POLICIES: dict[str, MultiPolicy] = {p.name: p for p in (
    MultiPolicy("always-spec", "always-spec", "upstream v1: every rank speculates, idle ranks take the idle verify",
                correct=True),
    MultiPolicy("naive-threshold", "naive-threshold", "the seed's patch on every rank, decided on the local batch"),
    MultiPolicy("fixed-threshold", "fixed-threshold", "the corrected single-rank fallback, decided on the local batch"),
    MultiPolicy("dp-global-sum", "fixed-threshold", "decided once from the sum of the gathered counts; idle "
                "ranks still take upstream's idle verify", decide=_within_sum),
    MultiPolicy("dp-sum-before-extend", "fixed-threshold", "agreed and applied on idle ranks, but tested before "
                "is_extend_in_batch: an extend iteration's idle ranks fall back", decide=_within_sum,
                idle_follows=True, extend_first=False),
    MultiPolicy("dp-agreed-threshold", "fixed-threshold", "the corrected multi-rank patch: speculate iff every "
                "rank's batch is within the threshold (max of the gathered counts), applied on idle ranks, "
                "is_extend_in_batch first", decide=_within_max, idle_follows=True, correct=True),
    MultiPolicy("dp-consensus-min", "fixed-threshold", "shaped like sglang PR #35898 (open): every busy rank "
                "appends its wanted steps to the MLP-sync gather, idle ranks a sentinel, the tier is the min of the "
                "column, written to the batch every rank forwards (idle ranks' too); extend first",
                decide=_consensus_min, idle_follows=True, correct=True),
)}


def policy_names() -> tuple[str, ...]:
    return tuple(POLICIES)


def get_policy(name: str) -> MultiPolicy:
    try:
        return POLICIES[name]
    except KeyError:
        raise UnknownName(f"Expected a multi-rank variant from {sorted(POLICIES)} but got {name!r}") from None
