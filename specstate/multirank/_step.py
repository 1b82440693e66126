"""``multi_step(state, action, ...)``: one action on every DP rank.

An ``Arrive`` goes to one rank (``_routing.dispatch``: round robin, or the least loaded under
``--load-balance-method total_requests``; a ``RoutedArrive`` to the rank it names), an ``Abort``
to the rank holding the request; a
``Step`` is one ``Scheduler.event_loop_normal`` iteration on every rank at once. Each rank's
iteration is the single-rank model's ``step`` (``specstate.model.step``) with that rank's own
operations; what this module adds is what the ranks share, as sglang 0.5.12's
``scheduler.py::Scheduler.get_next_batch_to_run`` does it under speculation + DP attention:

1. every rank builds its prefill batch, then the *prefill-first* MLP sync
   (``maybe_prepare_mlp_sync_batch(new_batch)``, "prefill and decode batches will not be mixed");
   if any rank has a prefill, every rank without one runs an IDLE batch this iteration
   (``prepare_mlp_sync_batch_raw`` -> ``get_idle_batch``) and its running batch waits: its
   single-rank step is discarded but for the EOS the action names (still pending on its requests);
   the one thing lost is the merge of last iteration's prefill batch, which the rank then does one
   iteration later (nothing observable depends on when);
2. otherwise each rank updates its running batch (``update_running_batch``) and the *decode*
   MLP sync gathers the batch sizes; if every rank has none, nobody runs a forward (each rank's
   ``on_idle``); a rank with none while another has one runs an IDLE batch, without ``on_idle``;
3. the policy (``_policy.py``) decides: locally inside each rank's worker, or once from the
   gathered record, forced onto each rank's ``decide_speculation``;
4. each rank's worker runs; its path, its target forward's DP-gather layout
   (``_collectives.py``) and the single-rank outcome are recorded.

A ``Step``'s ``accept`` applies to every rank alike (row ``i`` of each rank's batch); its ``eos``
names global request ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from specstate.model import Abort, Action, Arrive, Step, StepOutcome
from specstate.model.step import step  # the function (the package's lazy ``step`` shares the module's name)
from specstate.model.config import SpecConfig
from specstate.model.ops_table import Ops
from specstate.model.state import ModelState
from specstate.multirank._collectives import sync_collective, target_collective
from specstate.multirank._config import RankConfig
from specstate.multirank._policy import MultiPolicy
from specstate.multirank._records import Collective, RankIteration, RankPath, SyncEntry, SyncRecord
from specstate.multirank._routing import RoutedArrive, dispatch, report_loads
from specstate.multirank._state import MultiState

__all__ = ["MultiOutcome", "MultiModel", "multi_step"]


@dataclass(frozen=True)
class MultiOutcome:
    before: MultiState
    action: Action  #: or a ``RoutedArrive``
    state: MultiState
    outcomes: tuple[StepOutcome | None, ...]  #: per rank, the single-rank outcome (``None``: not stepped)
    iteration: RankIteration | None = None  #: a ``Step``'s shared record


@dataclass
class MultiModel:
    """What a multi-rank run needs besides the state: configs, the policy, each rank's operations."""

    config: SpecConfig
    ranks: RankConfig
    policy: MultiPolicy
    ops: Ops
    _forced: dict[bool | None, Ops] = field(default_factory=dict)
    #: (operations, rank state, action) -> the single-rank outcome: ``step`` is pure, and ranks (and
    #: the paths a search or a proof takes) meet equal states often; emptied at ``_MEMO_LIMIT``
    _memo: dict[tuple[Any, ModelState, Step, Any], StepOutcome] = field(default_factory=dict, repr=False)
    _checks: dict[int, tuple[StepOutcome, list[Any]]] = field(default_factory=dict, repr=False)

    def step(self, state: ModelState, action: Step, which: bool | str | None = "ops",
             context: tuple[int, ...] | None = None) -> StepOutcome:
        """``step(state, action, ops)`` with ``ops`` the rank's own (``"ops"``), an IDLE batch's
        (``None``) or the agreed decision forced in (``True`` / ``False``; ``context``: the gathered
        list the decision was taken from, ``_with_context``); remembered."""
        key = (which, state, action, context)
        got = self._memo.get(key)
        if got is None:
            bare = _bare(state)
            if bare is state:
                ops = self.ops if which == "ops" else self.idle_batch_ops() if which is None else self.forced(bool(which))
                got = step(state, action, ops)
            else:  # the same step on the state without its gathered lists, then those lists put back
                got = _dressed(self.step(bare, action, which), state, bare)
            if context is not None:
                got = _with_context(got, context)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
                self._checks.clear()
            self._memo[key] = got
        return got

    def violations(self, o: StepOutcome) -> list[Any]:
        """``invariants.check_outcome(o)``, remembered per outcome object (a remembered step's
        outcome is met again by every rank and path that takes that step)."""
        got = self._checks.get(id(o))
        if got is None or got[0] is not o:
            from specstate.invariants import check_outcome

            got = self._checks[id(o)] = (o, check_outcome(o))
        return got[1]

    def idle_batch_ops(self) -> Ops:
        """The rank's operations for an iteration in which it runs ``get_idle_batch``'s IDLE batch
        because another rank has work: no ``on_idle`` (``Scheduler.event_loop_normal`` calls
        ``self_check_during_idle`` only when there is no batch at all, so ``new_token_ratio`` stays)."""
        if None not in self._forced:
            self._forced[None] = self.ops.replace(idle=_idle_batch)
        return self._forced[None]

    def forced(self, speculate: bool) -> Ops:
        """The rank's operations with ``decide_speculation`` answering the agreed decision."""
        if speculate not in self._forced:
            self._forced[speculate] = self.ops.replace(decide_speculation=lambda ops, tx, batch: speculate)
        return self._forced[speculate]


_MEMO_LIMIT = 20_000
#: under an agreed policy, the first pass of a decode rank takes the plain path (``_iterate``)
_PROBE = True


def _bare(state: ModelState) -> ModelState:
    """``state`` with the gathered lists its switch decisions hold (``_with_context``) erased. No
    operation of the 0.5.12 family reads ``Decision.context`` (only the ``stable-switch-decision``
    invariant does, on the outcome), so ``step`` on the bare state is ``step`` on the state but for
    those lists, which ``_dressed`` puts back: ranks whose gathered lists differ share one step."""
    ds = state.decisions
    if not any(d.context for d in ds):
        return state
    return state.evolve(decisions=tuple(replace(d, context=()) if d.context else d for d in ds))


def _dressed(o: StepOutcome, state: ModelState, bare: ModelState) -> StepOutcome:
    """The outcome of the step from ``bare`` (or from a state equal to it) as the step from
    ``state``: every decision it carried over from ``bare`` (equal to one of ``bare``'s: the step
    keeps the last decisions as they are; a new one has this iteration's ``step_index``, which no
    earlier one has) replaced by ``state``'s, and ``before`` the state itself."""
    back = {b: d for b, d in zip(bare.decisions, state.decisions)}
    ds = o.state.decisions
    kept = tuple(back.get(d, d) for d in ds)
    after = o.state if all(a is b for a, b in zip(kept, ds)) else o.state.evolve(decisions=kept)
    return replace(o, before=state, state=after)


def _idle_batch(ops: Ops, tx: Any) -> Any:
    return tx.log("idle", "an IDLE batch (get_idle_batch): another DP rank has work")


def multi_step(model: MultiModel, state: MultiState, action: "Action | RoutedArrive") -> MultiOutcome:
    if isinstance(action, (Arrive, RoutedArrive)):
        return _arrive(model, state, action)
    if isinstance(action, Abort):
        return _abort(model, state, action)
    return _iterate(model, state, action)


def _replace(ranks: tuple[Any, ...], r: int, value: Any) -> tuple[Any, ...]:
    return ranks[:r] + (value,) + ranks[r + 1:]


def _arrive(model: MultiModel, state: MultiState, action: "Arrive | RoutedArrive") -> MultiOutcome:
    n = len(state.ranks)
    given = action
    if isinstance(action, RoutedArrive):  # maybe_external_dp_rank_routing: before the method, moving nothing
        if type(action.rank) is not int or not 0 <= action.rank < n:
            from specstate.errors import InvalidAction
            raise InvalidAction(f"Expected a routed DP rank in [0, {n}) but got {action.rank!r}")
        r, counter, budget = action.rank, state.round_robin_counter, state.budget
        action = action.arrive
    else:
        r, counter, budget = dispatch(model.ranks.load_balance_method, n, state.round_robin_counter, state.budget)
    local = len(state.ranks[r].reqs)
    prefix, shared = None, 0
    if action.prefix_of is not None and state.owner[action.prefix_of][0] == r:  # a prefix is cached on its rank only
        prefix, shared = state.owner[action.prefix_of][1], action.shared_len
    o = model.step(state.ranks[r], Arrive(action.prompt_len, action.max_new_tokens, prefix, shared))
    after = MultiState(_replace(state.ranks, r, o.state), state.owner + ((r, local),), counter,
                       state.step_index + 1, budget)
    return MultiOutcome(state, given, after, _one(n, r, o))


def _one(n: int, r: int, o: StepOutcome) -> tuple[StepOutcome | None, ...]:
    return tuple(o if i == r else None for i in range(n))


def _abort(model: MultiModel, state: MultiState, action: Abort) -> MultiOutcome:
    if type(action.rid) is not int or not 0 <= action.rid < len(state.owner):
        from specstate.errors import InvalidAction
        raise InvalidAction(f"Expected a request id in [0, {len(state.owner)}) but got rid={action.rid!r}")
    r, local = state.owner[action.rid]
    o = step(state.ranks[r], Abort(local), model.ops)
    after = MultiState(_replace(state.ranks, r, o.state), state.owner, state.round_robin_counter, state.step_index + 1,
                       state.budget)
    return MultiOutcome(state, action, after, _one(len(state.ranks), r, o))


def _local_step(state: MultiState, r: int, action: Step) -> Step:
    eos = tuple(local for g in action.eos if 0 <= g < len(state.owner) for rank, local in (state.owner[g],) if rank == r)
    return Step(action.accept, eos)


def _extend_tokens(o: StepOutcome) -> int:
    return sum(sum(f.extend_lens or ()) for f in o.forwards if f.phase == "forward_target_extend")


def _prefill_sync(outs: list[StepOutcome]) -> SyncRecord:
    entries = []
    for o in outs:
        if o.batch_kind == "prefill":
            entries.append(SyncEntry(_extend_tokens(o), len(o.batch_rids), False, True, "EXTEND"))
        else:
            entries.append(SyncEntry(0, 0, True, False, "NONE"))
    return SyncRecord("prefill-first", tuple(entries))


def _decode_sync(outs: list[StepOutcome]) -> SyncRecord:
    entries = []
    for o in outs:
        bs = len(o.batch_rids) if o.batch_kind == "decode" else 0
        entries.append(SyncEntry(bs, bs, True, False, "DECODE" if bs else "NONE"))
    return SyncRecord("decode", tuple(entries))


def _iterate(model: MultiModel, state: MultiState, action: Step) -> MultiOutcome:
    n = len(state.ranks)
    steps = [_local_step(state, r, action) for r in range(n)]
    # under an agreed policy a decode rank's first outcome is only read for its batch (kind, rows) and
    # stepped again with the agreed decision; the decision is read in a decode only
    # (``worker.decode``), so this first pass takes the cheaper plain path there
    probe: bool | str = False if _PROBE and model.policy.decide is not None else "ops"
    outs = [model.step(state.ranks[r], steps[r], probe) for r in range(n)]
    first = _prefill_sync(outs)
    if first.need_idle_batch:
        return _extend_iteration(model, state, action, outs, first, steps)
    second = _decode_sync(outs)
    decision = None
    if second.need_idle_batch:
        outs = [model.step(state.ranks[r], steps[r], None) if outs[r].batch_kind == "idle" else outs[r] for r in range(n)]
    if second.need_idle_batch and model.policy.decide is not None:
        decision = model.policy.decide(second, model.config.disable_batch_threshold)
        outs = [model.step(state.ranks[r], steps[r], decision, second.global_num_tokens) if outs[r].batch_kind == "decode"
                else outs[r] for r in range(n)]
    paths = [_decode_path(model, o, second, decision) for o in outs]
    return _finish(model, state, action, outs, (first, second), paths, decision)


def _with_context(o: StepOutcome, context: tuple[int, ...]) -> StepOutcome:
    """The agreed decision's other legitimate input, the gathered counts, as its ``Decision.context``
    (``stable-switch-decision`` compares decisions over equal rows *and* equal context)."""
    d = o.state.decisions
    if o.crash is not None or not d or d[-1].step_index != o.state.step_index:
        return o
    last = replace(d[-1], context=context)
    return replace(o, state=o.state.evolve(decisions=d[:-1] + (last,)))


def _held(rank: ModelState, step_: Step) -> ModelState:
    """A rank whose decode waits (forced IDLE): its state before the iteration, with the EOS the
    action gave its requests still pending (upstream's next sampled token is still EOS)."""
    marks = [rank.req(r).evolve(eos_pending=True) for r in step_.eos if rank.req(r).live]
    return rank.with_reqs(marks) if marks else rank


def _extend_iteration(model: MultiModel, state: MultiState, action: Step, outs: list[StepOutcome],
                      first: SyncRecord, steps: list[Step]) -> MultiOutcome:
    policy, thr = model.policy, model.config.disable_batch_threshold
    falls_back = not policy.extend_first and policy.decide is not None and not policy.decide(first, thr)
    kept: list[StepOutcome | None] = []
    paths: list[RankPath] = []
    held: dict[int, ModelState] = {}
    for r, o in enumerate(outs):
        if o.batch_kind == "prefill":
            kept.append(o)
            paths.append(RankPath("extend", "prefill", len(o.batch_rids), 1, _extend_tokens(o)))
        else:  # forced IDLE: no update_running_batch (its decode waits, finished rows stay), no on_idle
            kept.append(None)
            held[r] = _held(state.ranks[r], steps[r])
            paths.append(RankPath("plain" if falls_back else "extend", "idle", 0, 1, 0))
    decision = None if policy.extend_first or policy.decide is None else ("speculate" if not falls_back else "plain")
    return _finish(model, state, action, kept, (first,), paths, decision, held)


def _decode_path(model: MultiModel, o: StepOutcome, sync: SyncRecord, decision: bool | None) -> RankPath:
    cfg = model.config
    ndt = cfg.speculative_num_draft_tokens
    if not sync.need_idle_batch:
        return RankPath("none", "none", 0, 0, 0)
    if o.batch_kind != "decode":
        plain = decision is False and model.policy.idle_follows
        return RankPath("plain", "idle", 0, 1, 0) if plain else RankPath("spec", "idle", 0, ndt, 0)
    bs = len(o.batch_rids)
    phases = {f.phase for f in o.forwards}
    if "naive_fallback_decode" in phases:
        fr = next(f for f in o.forwards if f.phase == "naive_fallback_decode")
        return RankPath("naive", "decode", bs, fr.num_tokens_per_req or 1, fr.input_ids[0] if fr.input_ids else 0)
    if "verify" in phases:
        return RankPath("spec", "decode", bs, ndt, bs * ndt)
    if "fallback_decode" in phases:
        return RankPath("plain", "decode", bs, 1, bs)
    return RankPath("none", "decode", bs, 0, 0)  # crashed before its target forward


def _finish(model: MultiModel, state: MultiState, action: Step, outs: Sequence[StepOutcome | None],
            syncs: tuple[SyncRecord, ...], paths: list[RankPath], decision: Any,
            held: dict[int, ModelState] | None = None) -> MultiOutcome:
    n = len(state.ranks)
    gather = syncs[-1]
    colls: list[tuple[Collective, ...]] = []
    for r in range(n):
        mine = [sync_collective(s, r) for s in syncs]
        c = target_collective(model.config, model.ranks, gather, paths[r], r)
        colls.append(tuple(mine + ([c] if c is not None else [])))
    held = held or {}
    ranks = tuple(o.state if o is not None and o.crash is None else held.get(r, state.ranks[r])
                  for r, o in enumerate(outs))
    if isinstance(decision, bool):
        decision = "speculate" if decision else "plain"
    it = RankIteration(state.step_index + 1, syncs, tuple(paths), tuple(colls), decision)
    streamed = tuple(p.batch in ("prefill", "decode") for p in paths)  # an IDLE batch streams nothing
    budget = report_loads(model.ranks.load_balance_method, state.budget, ranks, streamed)
    after = MultiState(ranks, state.owner, state.round_robin_counter, state.step_index + 1, budget)
    return MultiOutcome(state, action, after, tuple(outs), it)
