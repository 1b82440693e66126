"""The invariant registry's injection coverage: for every named invariant
(``specstate.invariants.all_invariants()``) and every engine generation, the cases that prove it
can fire and that it is not vacuous (upstream's ``utils/invariants.py`` registry, "enumerated by
the CI meta-test to enforce injection coverage"; ``tests/test_invariant_registry.py`` is that
meta-test).

- ``SUBJECTS``: per invariant, what it checks in one step (``StepOutcome -> value``; ``None``:
  nothing of its subject in this step). A positive control must show the subject present and
  changing (two distinct values at least) while the invariant holds.
- ``COVERAGE``: per ``(invariant, generation)`` either a :class:`Covered` entry (violating
  cases: a mutation of ``tests/mutations.py`` or a known-bug variant, each on a scripted story
  whose first bad step violates the invariant; positive controls: stories run on the
  generation's correct releases) or a :class:`Vacuous` entry (the invariant cannot fire in that
  generation; its story proves the subject never appears there, so the claim is tested too).

A new invariant fails the meta-test until it has a subject here and an entry per generation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable

from specstate.invariants._provenance import processed_result
from specstate.model import StepOutcome
from specstate.model.spec_info import EagleDraftInput
from tests.mutations import REGISTRY_MUTATIONS, V2_MUTATIONS

__all__ = ["GENERATIONS", "SUBJECTS", "COVERAGE", "Story", "Case", "Covered", "Vacuous", "mutation"]

#: generation -> the correct variants (one per release) its positive controls run on
GENERATIONS: dict[str, tuple[str, ...]] = {
    "v1": ("fixed-threshold",),  # sglang 0.5.12: EAGLEWorker, event_loop_normal
    "v2": ("upstream-adaptive", "upstream-v23"),  # sglang 0.5.17 and 0.5.23: EAGLEWorkerV2, the overlap scheduler
}

Subject = Callable[[StepOutcome], Hashable]


def _forwards(o: StepOutcome) -> Hashable:
    return tuple((f.worker.value, f.forward_mode.value) for f in o.forwards) or None


def _modes(o: StepOutcome) -> Hashable:
    kinds = tuple((f.worker.value, f.forward_mode.value, f.spec_info) for f in o.forwards)
    rest = type(o.state.running.spec_info).__name__ if o.batch_kind == "decode" else None
    return (kinds, rest) if kinds or rest else None


def _token_counts(o: StepOutcome) -> Hashable:
    return tuple((f.phase, f.expected_tokens) for f in o.forwards if f.expected_tokens is not None) or None


def _spec_rows(o: StepOutcome) -> Hashable:
    info = o.state.running.spec_info
    return info.rows if isinstance(info, EagleDraftInput) and not o.state.running.is_empty() else None


def _graphs(o: StepOutcome) -> Hashable:
    return tuple((f.phase, f.graph.raw_bs, f.graph.padded_bs) for f in o.forwards
                 if f.graph is not None and f.graph.reads) or None


def _kv(o: StepOutcome) -> Hashable:
    return o.state.kv_allocated if o.state.kv_allocated or o.before.kv_allocated else None


def _draft_kv(o: StepOutcome) -> Hashable:
    return tuple((f.rids, f.draft_kv_lens) for f in o.forwards if f.phase == "draft") or None


def _switch(o: StepOutcome) -> Hashable:
    """The case ``stable-switch-decision`` compares: two consecutive decisions over the same rows."""
    d = o.state.decisions
    same = len(d) == 2 and d[1].step_index == o.state.step_index and (d[0].rids, d[0].context) == (d[1].rids, d[1].context)
    return (d[1].rids, d[1].speculate) if same else None


def _provenance(o: StepOutcome) -> Hashable:
    p = processed_result(o)
    return (p.batch.rids, p.accept, p.steps) if p is not None and p.kind == "decode" else None


def _slices(o: StepOutcome) -> Hashable:
    """The graph slices a replay copies batch fields into, with each field's rows."""
    return tuple((f.phase, name, rows, getattr(f, name)) for f in o.forwards for name, rows in f.graph_slices) or None


def _pages_held(o: StepOutcome) -> Hashable:
    """Paged runs only: the pool's use (free, cached) in slots."""
    s = o.state
    return (s.kv_available, s.tree.total) if s.config.page_size > 1 and s.kv_allocated else None


def _pages_owned(o: StepOutcome) -> Hashable:
    """Paged runs only: the tree's node sizes and the live requests' tree-protected lengths."""
    s = o.state
    if s.config.page_size == 1 or not (s.tree.total or any(r.cache_protected_len for r in s.live_reqs())):
        return None
    return (tuple(len(n[2]) for n in s.tree.nodes), tuple(r.cache_protected_len for r in s.live_reqs()))


def _pages_request(o: StepOutcome) -> Hashable:
    """Paged runs only: each live request's committed and allocated lengths."""
    s = o.state
    rows = tuple((r.rid, r.kv_committed_len, r.kv_allocated_len) for r in s.live_reqs() if r.kv_allocated_len)
    return rows if s.config.page_size > 1 and rows else None


SUBJECTS: dict[str, Subject] = {
    "worker-crash": _forwards,  # the worker ran forwards (of several kinds)
    "mode-consistency": _modes,  # forward modes, their spec_info kinds, the decode batch's at rest
    "token-counts": _token_counts,  # forwards with a count of tokens to carry
    "spec-info-rows": _spec_rows,  # the running batch's draft input rows
    "graph-padding": _graphs,  # graph replays with buffers read
    "kv-accounting": _kv,  # slots allocated
    "draft-kv-in-step": _draft_kv,  # drafting forwards over the draft KV
    "stable-switch-decision": _switch,  # two decisions over the same decode rows
    "result-provenance": _provenance,  # a decode result processed a step after its launch
    "graph-input-rows": _slices,  # batch fields copied into graph slices
    "kv-pages-owned-once": _pages_owned,  # paged: the tree's nodes and the requests' protected prefixes
    "kv-pages-conserved": _pages_held,  # paged: free and cached slots
    "kv-pages-request-slots": _pages_request,  # paged: the requests' committed and allocated lengths
}


@dataclass(frozen=True)
class Story:
    """A scripted run: a scenario of ``specstate.scenarios`` (its config and actions)."""

    scenario: str
    seed: int = 0


@dataclass(frozen=True)
class Case:
    """``variant`` (a mutation's or known bug's name, or the object) violates the invariant in ``story``."""

    variant: object
    story: Story
    why: str  #: what the case breaks
    #: the corrected base runs the same story (and passes it); False where its engine start refuses
    #: the story's config (a known bug that needs a start the release rejects)
    base_runs: bool = True


@dataclass(frozen=True)
class Covered:
    violating: tuple[Case, ...]
    controls: tuple[Story, ...]


@dataclass(frozen=True)
class Vacuous:
    """The invariant cannot fire in this generation: ``story`` (on each correct release) never
    shows its subject."""

    reason: str
    story: Story


def mutation(name: str) -> object:
    """A mutation of ``tests/mutations.py`` by name (the registry's own and the v2 ones)."""
    for m in REGISTRY_MUTATIONS + V2_MUTATIONS:
        if m.name == name:
            return m
    raise KeyError(name)


OSC = Story("oscillate")  #: v1: a decode batch hovering around the threshold
#: v2: the seed's sweep under the H200 adaptive config (steps 3 to batch size 5, steps 0 above: under
#: ``oscillate``'s v1 config a v2 release drafts in 1-3 steps of 133-144, too few for a control)
SWEEP = Story("adaptive-sweep")


def _bug(name: str) -> Story:
    return Story(f"bug:{name}")


PAGED = Story("paged-oscillate")  #: v1 at --page-size 16
PAGED_V2 = Story("paged-adaptive")  #: v2 at --page-size 16: the adaptive switch, a shared prefix, finishes
PAGED_CTX = Story("paged-context")  #: v2 at --page-size 16: one request decoding to the context length

COVERAGE: dict[tuple[str, str], Covered | Vacuous] = {
    ("kv-pages-owned-once", "v1"): Covered(
        (Case(mutation("mutant-paged-unaligned-insert"), PAGED, "a radix node holding part of a page"),),
        (PAGED,)),
    ("kv-pages-owned-once", "v2"): Covered(
        (Case(mutation("mutant-paged-v2-unaligned-insert"), PAGED_V2, "a radix node holding part of a page"),),
        (PAGED_V2,)),
    ("kv-pages-conserved", "v1"): Covered(
        (Case(mutation("mutant-paged-free-rejected-slots"), PAGED, "rejected draft slots freed one by one"),),
        (PAGED,)),
    ("kv-pages-conserved", "v2"): Covered(
        (Case(mutation("mutant-paged-v2-token-decode-alloc"), PAGED_V2, "the decode over-allocation in tokens"),),
        (PAGED_V2,)),
    ("kv-pages-request-slots", "v1"): Covered(
        (Case(mutation("mutant-paged-decode-in-last-page"), PAGED, "a decode token written past the allocation"),),
        (PAGED,)),
    ("kv-pages-request-slots", "v2"): Covered(
        (Case(mutation("mutant-paged-v2-extra-page"), PAGED_CTX, "a page past the row's paged headroom"),),
        (PAGED_V2, PAGED_CTX)),
    ("worker-crash", "v1"): Covered(
        (Case("naive-threshold", OSC, "the seed's patch: a plain decode through the TARGET_VERIFY graph"),
         Case("tests.user_variants.crashes:AssertsAboveTwoRows", OSC, "a user's variant raising through guarded")),
        (OSC,)),
    ("worker-crash", "v2"): Covered(
        (Case("v2-chain-buffers-not-rebuilt", _bug("v2-chain-buffers-not-rebuilt"), "chain buffers of 3 steps at 7",
              base_runs=False),
         Case("tests.user_variants.crashes:OverflowingReplay23", OSC, "a 0.5.23 target replay copy overflows")),
        (SWEEP,)),
    ("mode-consistency", "v1"): Covered(
        (Case(mutation("mutant-decode-drops-draft-input"), OSC, "the decode batch at rest has no draft input"),),
        (OSC,)),
    ("mode-consistency", "v2"): Covered(
        (Case(mutation("mutant-v2-decode-drops-draft-input"), _bug("v2-single-reserve"),
              "the v2 decode batch at rest has no draft input"),),
        (SWEEP,)),
    ("token-counts", "v1"): Covered(
        (Case("mixed-reuses-spec-loc", _bug("mixed-reuses-spec-loc"), "accepted slots reused by a mixed batch"),),
        (OSC,)),
    ("token-counts", "v2"): Covered(
        (Case(mutation("mutant-v2-verify-loc-short"), _bug("v2-single-reserve"), "verify one cache location short"),),
        (SWEEP,)),
    ("spec-info-rows", "v1"): Covered(
        (Case("finish-before-filter", _bug("finish-before-filter"), "filter truncates instead of selecting"),
         Case("unfiltered-accept-length", _bug("unfiltered-accept-length"), "a per-row field left unfiltered")),
        (OSC,)),
    ("spec-info-rows", "v2"): Covered(
        (Case(mutation("mutant-merge-order-on-upstream-adaptive"), OSC, "merge puts the prefilled rows first"),),
        (SWEEP,)),
    ("graph-padding", "v1"): Covered(
        (Case("stale-graph-padding", _bug("stale-graph-padding"), "padding rows not reset"),),
        (OSC,)),
    ("graph-padding", "v2"): Covered(
        (Case(mutation("mutant-pad-to-largest-on-upstream-adaptive"), _bug("v2-single-reserve"),
              "every replay padded to the largest size"),),
        (SWEEP,)),
    ("kv-accounting", "v1"): Covered(
        (Case("kv-leak-spec-tail", _bug("kv-leak-spec-tail"), "rejected draft slots never freed"),),
        (OSC,)),
    ("kv-accounting", "v2"): Covered(
        (Case("v2-single-reserve", _bug("v2-single-reserve"), "one reservation per decode"),
         Case("v2-commit-after-finish", _bug("v2-commit-after-finish"), "a commit after the request finished")),
        (SWEEP,)),
    ("draft-kv-in-step", "v1"): Covered(
        (Case("draft-kv-stale-on-resume", _bug("draft-kv-stale-on-resume"), "no draft-extend while off"),),
        (OSC,)),
    ("draft-kv-in-step", "v2"): Covered(
        (Case("v2-skip-zero-step-draft-extend", _bug("v2-skip-zero-step-draft-extend"), "no draft-extend at steps 0"),),
        (SWEEP,)),
    ("stable-switch-decision", "v1"): Covered(
        (Case("switch-thrash", _bug("switch-thrash"), "a queued prefill row flips the decision"),),
        (OSC,)),
    ("stable-switch-decision", "v2"): Covered(
        (Case(mutation("mutant-v2-activate-counts-queue"), _bug("switch-thrash"), "the queue routes the step count"),),
        (SWEEP,)),
    ("graph-input-rows", "v1"): Covered(
        (Case("seed-patch-alloc", Story("seed-benchmark"),
              "the seed's patch: the batch's carried input_ids (2 rows) into the 160-row slice"),
         Case("naive-threshold", OSC, "a DECODE batch (one token per request) into TARGET_VERIFY's slices")),
        (OSC,)),
    ("graph-input-rows", "v2"): Covered(
        (Case("tests.user_variants.crashes:WideTrivialTree17", SWEEP,
              "the steps-0 verify feeds 2 tokens per request into the 1-token graph"),),
        (SWEEP,)),
    ("result-provenance", "v1"): Vacuous(
        "0.5.12 runs event_loop_normal: a result is processed in the iteration that launched it, so no step "
        "processes another launch's result (the subject, processed_result, never exists)", OSC),
    ("result-provenance", "v2"): Covered(
        (Case(mutation("mutant-v2-ema-newest-batch"), _bug("v2-alloc-follows-active-steps"),
              "the EMA fed the newest launch's batch size"),),
        (SWEEP,)),
}
