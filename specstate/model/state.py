"""The whole modelled state of one scheduler process, as one frozen value.

Owns: requests, the waiting queue, the running decode batch, last iteration's prefill batch
(merged at the start of the next iteration, as ``Scheduler.get_next_batch_to_run`` does), the
chunked request, the token-slot allocator's free count, the radix tree, ``new_token_ratio`` and
the last switch decisions.

Counting identity (KV), written once here and asserted by the ``kv-accounting`` invariant
after every step (page size P; ``specstate.model.kv``)::

    kv_pool_size == kv_available + tree.evictable + tree.protected
                    + sum(ceil_align(req.kv_allocated_len, P) - req.cache_protected_len for admitted requests)

and, when no request is live (the scheduler idles), only the radix tree holds slots
(``SchedulerRuntimeCheckerMixin.on_idle`` -> ``_check_all_pools``: "token_to_kv_pool_allocator memory
leak detected!"). Slots taken for draft tokens inside one iteration (``_draft_preprocess_decode``
restores the allocator, ``verify`` frees the rejected ones) never survive the iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from specstate.model.values import cached_hash, evolve
from typing import Any, Callable, Iterable

from specstate.errors import InternalError
from specstate.model.batch import EMPTY_BATCH, ScheduleBatch
from specstate.model.config import SpecConfig
from specstate.model.radix import EMPTY_TREE, RadixTree, empty_tree
from specstate.model.graph_buffers import EMPTY_GRAPH_BUFFERS, GraphBuffers
from specstate.model.request import Req, ReqStatus

__all__ = ["Decision", "ModelState", "OverlapPart", "NO_OVERLAP", "build_initial_state"]

_HOLDING = (ReqStatus.RUNNING, ReqStatus.PREFILLING)  #: statuses that hold a ``req_to_token_pool`` slot


@cached_hash
@dataclass(frozen=True)
class Decision:
    """One decode iteration's switch decision."""

    rids: tuple[int, ...]  #: the decode batch's requests
    speculate: bool
    step_index: int
    #: the decision's other legitimate inputs (v2: every adaptive slot's EMA-chosen step count);
    #: ``stable-switch-decision`` compares decisions with equal rows and equal context
    context: tuple[int, ...] = ()


class OverlapPart:
    """What a release's scheduler carries from one iteration to the next beside the shared
    state (``ModelState.v2``), as the shared code asks it (``ModelState.overlap``). The answers
    here are the neutral ones, the shared core's (sglang 0.5.12's ``event_loop_normal``: no result
    in flight, no state of its own, the shared counting identities); a release with an overlap
    scheduler subclasses it and answers for itself (``sglang_0_5_17.state.OverlapState``), so
    that no shared module tests which release it runs."""

    pending: Any = None  #: the result this iteration processes (launched by the one before)
    launched: Any = None  #: this iteration's launched batch, while the iteration runs
    chunked_abort: int | None = None  #: the chunked request an abort marked, aborted next iteration
    adaptive: Any = None  #: the adaptive controller's slots
    #: the release's own counting identities (a module with ``request_kv``, ``in_flight_prefill``,
    #: ``forward_writes``, ``spec_rows``, ``draft_kv_covers``), checked by the shared invariants
    #: in place of their own; ``None``: the shared ones hold
    identities: Any = None

    def result_rids(self) -> tuple[int, ...]:
        """The rows of the results in flight: the pending result's, then the launched one's."""
        return ()

    def named_rids(self) -> tuple[int, ...]:
        """Every request this part names, in order: the results' rows, then ``chunked_abort``."""
        return ()

    def speculated(self, state: "ModelState", forwards: tuple[Any, ...]) -> bool:
        """Whether the decode iteration that reached ``state`` (running ``forwards``) speculated:
        the shared worker's drafting runs a draft forward."""
        return any(f.phase == "draft" for f in forwards)


NO_OVERLAP = OverlapPart()  #: the part of a state whose release carries none (``ModelState.v2`` is ``None``)


@cached_hash
@dataclass(frozen=True)
class ModelState:
    config: SpecConfig
    step_index: int = 0  #: actions applied so far
    reqs: tuple[Req, ...] = ()  #: every request ever seen; ``reqs[rid].rid == rid``
    waiting: tuple[int, ...] = ()  #: ``Scheduler.waiting_queue`` (FCFS by rid)
    running: ScheduleBatch = EMPTY_BATCH  #: ``Scheduler.running_batch``
    last_batch: ScheduleBatch | None = None  #: ``Scheduler.last_batch`` when it was a prefill
    chunked_rid: int | None = None  #: ``Scheduler.chunked_req``
    kv_available: int = 0  #: ``token_to_kv_pool_allocator.available_size()``
    decisions: tuple[Decision, ...] = ()  #: the last two decode decisions, newest last
    tree: RadixTree = EMPTY_TREE  #: ``Scheduler.tree_cache`` (``RadixCache``)
    new_token_ratio: float = 0.7  #: ``Scheduler.new_token_ratio``
    #: the CUDA-graph runners' static buffers, persisting between replays (``graph_buffers.py``)
    graphs: GraphBuffers = EMPTY_GRAPH_BUFFERS
    #: the v2 family's overlap-scheduler and adaptive-worker state (``specstate.model.sglang_0_5_17``:
    #: ``OverlapState``, an ``OverlapPart``); ``None`` for the v1 family (``SpecConfig.disable_overlap_schedule``);
    #: shared code reads it through ``overlap``
    v2: "OverlapPart | None" = None
    #: bookkeeping, not state (no part of equality or hashing): ``(base, reqs, rids)`` says
    #: ``reqs`` differs from the tuple ``base`` only at ``rids`` and past ``len(base)``;
    #: ``with_reqs`` / ``with_new_req`` keep it, so ``kv-accounting`` checks what a step
    #: changed instead of every request ever seen. Valid only while ``reqs is`` its second item.
    reqs_delta: tuple | None = field(default=None, compare=False, repr=False)

    # -- queries --------------------------------------------------------------------
    def req(self, rid: int) -> Req:
        return self.reqs[rid]

    def live_reqs(self) -> tuple[Req, ...]:
        reqs = self.reqs
        return tuple([reqs[i] for i in self.live_rids()])

    def live_rids(self) -> tuple[int, ...]:
        """The live requests' ids, ascending: the *live-request index*, bookkeeping kept on the
        state (``_live``, not a field; valid while its first item is ``reqs``): ``with_reqs`` /
        ``with_new_req`` derive it from the previous state's index and the requests they change,
        and ``evolve`` carries it, so a step's cost does not grow with the requests ever seen. A state built any
        other way computes it once, from ``reqs``."""
        d = self.__dict__
        live = d.get("_live")
        if live is None or live[0] is not self.reqs:
            live = d["_live"] = (self.reqs, tuple([r.rid for r in self.reqs if r.live]))
        return live[1]

    @property
    def kv_allocated(self) -> int:
        return self.config.kv_pool_size - self.kv_available

    def req_slots_held(self) -> int:
        """Requests holding a ``req_to_token_pool`` slot (admitted, not released); remembered
        on the state (``_slots_held``, checked against ``reqs`` by identity)."""
        d = self.__dict__
        got = d.get("_slots_held")
        if got is None or got[0] is not self.reqs:
            reqs = self.reqs
            n = sum(1 for i in self.live_rids() if reqs[i].status in _HOLDING and reqs[i].kv_allocated_len)
            got = d["_slots_held"] = (reqs, n)
        return got[1]

    def is_idle(self) -> bool:
        return not self.live_rids()

    @property
    def overlap(self) -> OverlapPart:
        """The release's part of the state (``v2``), or the neutral one where it has none
        (``NO_OVERLAP``): what shared code asks instead of testing the release."""
        part = self.v2
        return NO_OVERLAP if part is None else part

    def is_quiet(self) -> bool:
        """Nothing in flight: no prefill batch left to merge (``last_batch``) and no result
        waiting one iteration (the overlap scheduler's, ``OverlapState.pending``)."""
        return self.last_batch is None and self.overlap.pending is None

    # -- pure updates ---------------------------------------------------------------
    def with_reqs(self, reqs: Iterable[Req]) -> "ModelState":
        new = list(self.reqs)
        rids = []
        for r in reqs:
            new[r.rid] = r
            rids.append(r.rid)
        return self._with(tuple(new), rids)

    def with_new_req(self, req: Req, **changes: object) -> "ModelState":
        """``req`` appended (``req.rid == len(reqs)``), plus other field ``changes``."""
        return self._with(self.reqs + (req,), ()).evolve(**changes)

    def _with(self, new: tuple[Req, ...], rids: Iterable[int]) -> "ModelState":
        d = self.reqs_delta
        base, known = (d[0], d[2]) if d is not None and d[1] is self.reqs else (self.reqs, frozenset())
        changed = frozenset(rids)
        out = evolve(self, reqs=new, reqs_delta=(base, new, known | changed))
        live = self.__dict__.get("_live")
        if live is not None and live[0] is self.reqs:  # derive the live index from the changes
            out.__dict__["_live"] = _live_after(live, new, changed)
        return out

    def changed_since(self, before: tuple[Req, ...]) -> list[int] | None:
        """The rids whose ``Req`` may differ from ``before`` (a tuple of an earlier state),
        or ``None`` when the bookkeeping cannot say (then compare them all)."""
        d = self.reqs_delta
        if self.reqs is before:
            return []
        if d is None or d[1] is not self.reqs or d[0] is not before:
            return None
        return sorted(set(d[2]) | set(range(len(before), len(self.reqs))))

    #: ``values.evolve``: a copy with some fields changed (``_live`` and ``_kv_memo`` travel:
    #: they check ``reqs`` by identity)
    evolve = evolve


def _live_after(live: tuple[tuple[Req, ...], tuple[int, ...]], new: tuple[Req, ...],
                changed: frozenset[int]) -> tuple[tuple[Req, ...], tuple[int, ...]]:
    """The live index of ``new`` from ``live`` (the index of the tuple before, ``old``), when only
    the requests ``changed`` and those past ``len(old)`` may differ: in the common case (no
    changed request became live or stopped being live) the old tuple, plus any live newcomers."""
    old, rids = live
    n = len(old)
    flipped = [i for i in changed if i < n and old[i].live != new[i].live]
    added = [i for i in range(n, len(new)) if new[i].live]
    if flipped:
        return new, tuple(sorted(set(rids).symmetric_difference(flipped).union(added)))
    return new, (rids + tuple(added) if added else rids)


def build_initial_state(config: SpecConfig,
                        overlap_start: Callable[[SpecConfig], OverlapPart] | None) -> ModelState:
    """The state before the first action, the overlap scheduler's part (``config -> OverlapPart``)
    built by ``overlap_start``, handed by the caller (``step.initial_state``: the release that
    models the overlap scheduler gives it, ``Release.overlap_start``): the shared core imports no
    release and keeps no slot."""
    v2 = None
    if not config.disable_overlap_schedule:
        if overlap_start is None:
            raise InternalError("Expected a release that models the overlap scheduler (a defaults.py with "
                                "OVERLAP_START) for a launch without --disable-overlap-schedule")
        v2 = overlap_start(config)
    return ModelState(config=config, kv_available=config.kv_pool_size, new_token_ratio=config.init_new_token_ratio,
                      v2=v2, tree=empty_tree(config.page_size))
