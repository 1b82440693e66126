"""Exhaustive breadth-first exploration of the model's abstract state space (Stateright's
``checker/bfs.rs``, in small).

From ``initial_state(config)`` every action of a small *alphabet* (a function of the
state, in a fixed order) is applied; states are deduplicated by a canonical key, and every
outcome is checked against every invariant. Breadth-first order makes the first violating
path found a shortest counterexample (over that alphabet, within the bounds).

Canonical key: ``ModelState`` is a frozen, hashable dataclass; the key is the state with
``step_index`` set to 0, every stored switch decision's ``step_index`` set to -1 ("some
earlier iteration": the invariants only compare it with the *current* step) and each
request's ``retractions`` counter (read by nothing) set to 0, and every graph-buffer row
reduced to "fill value" or "some earlier replay's" (``GraphBuffers.canonical``: only that is
ever compared; the writer's request id appears in reports alone). Exploration continues from
the canonical state, so two paths reaching the same canonical state share one node.

The bounds: ``max_depth`` actions, ``max_live`` live requests (no arrival beyond it),
``max_arrivals`` requests in all (request ids are part of the state), ``max_states``.
The explored graph is a ``networkx.DiGraph``: nodes carry a short label, edges a count and
the labels of the actions that take one node to the other; violating nodes are terminal.
"""

from __future__ import annotations

import functools
import sys
import time
from operator import attrgetter
from collections import deque
from dataclasses import dataclass, field
from specstate.model.values import BoundedMemo, evolve
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from specstate.check import checked_step, run_actions
from specstate.heap import frozen_heap
from specstate.invariants import Violation, check_outcome, outcome_witnesses
from specstate.model import Abort, Action, Arrive, ModelState, Ops, SpecConfig, Step, Variant, as_variant, initial_state
from specstate.model.batch import ScheduleBatch
from specstate.model.modes import ForwardMode
from specstate.model.request import Req, ReqStatus
from specstate.model.state import Decision
from specstate._lazy import lazy_module
from specstate.fuzz.search import Alphabet, SleepSets, _Search, action_label, commuting, independent, is_env, state_label
from specstate.fuzz.reads import ERASURES, kept
from specstate.fuzz.symmetry import compact_tree, concrete_path, relabel, rename_action

if TYPE_CHECKING:
    import networkx as nx  # the checker reads the real module; at run time, the stand-in below
else:
    nx = lazy_module("networkx", globals(), "nx")  # imported at the first graph (specstate/_lazy.py)

__all__ = ["canonical", "Alphabet", "default_alphabet", "ExploreResult", "explore", "action_label", "state_label",
           "DEFAULT_EXPLORE_CONFIG"]

#: ``SMALL`` from scenarios (2 steps, topk 2, 4 draft tokens, threshold 2), with graphs
#: captured at (1, 4) only, so 2 and 3 requests replay padded to 4 (also after a larger
#: replay), and a 26-slot KV pool: with the default alphabet (4-token prompts, 3 or 6 new
#: tokens) two requests retract while speculating and three while falling back, within
#: depth 7 (``tests/test_fuzz_unit.py``)
DEFAULT_EXPLORE_CONFIG = SpecConfig(
    speculative_num_steps=2, speculative_eagle_topk=2, speculative_num_draft_tokens=4, disable_batch_threshold=2,
    cuda_graph_max_bs=4, max_running_requests=8, target_kv_pool_size=26, draft_kv_pool_size=26,
    chunked_prefill_size=64, cuda_graph_bs_override=(1, 4))



def canonical(state: ModelState, *, reduce: bool = False, symmetric: bool = False,
              keep: frozenset[str] = frozenset()) -> ModelState:
    """The state with step counters and retraction counts erased (see the module doc);
    ``reduce``: also every field of a finished or aborted request but its id, prompt length,
    and token segments (:func:`settled`; a finished row of the running batch keeps its remaining
    tokens, :func:`settled_row`), the v1 decode batch's spent ``extend_lens`` (:func:`spent_batch`),
    every switch decision but the last (:func:`kept_decisions`), the radix tree's node ids in
    content order and its clock as ranks (``symmetry.compact_tree``); ``symmetric`` (with ``reduce``): the representative of the
    state's class under renamings of request ids (``symmetry.relabel``). ``keep``: the erasures
    not made (``specstate.fuzz.reads``: the ones a variant's own operations can read, by name:
    ``step-counters``, ``retractions``, ``graph-writers``, ``settled``, ``extend-lens``,
    ``decisions``, ``tree``, ``ids``).

    Equal canonical decisions are one object (``_DECISIONS``), as equal canonical graph buffers
    are (``GraphBuffers.canonical``), and the step's ``reqs_delta`` bookkeeping is dropped
    (``step`` starts every step without it): a search keeps every state it has seen."""
    return canonical_renamed(state, reduce=reduce, symmetric=symmetric, keep=keep)[0]


def canonical_renamed(state: ModelState, *, reduce: bool = False, symmetric: bool = False,
                      keep: frozenset[str] = frozenset()) -> tuple[ModelState, Sequence[int] | None]:
    """:func:`canonical`, and the renaming of request ids it applied (``None``: none)."""
    if keep:
        return _kept_renamed(state, reduce, symmetric, keep)
    decisions = tuple([_canonical_decision(d) for d in (kept_decisions(state.decisions) if reduce else state.decisions)])
    reqs = state.reqs
    if reduce and any(r.done for r in reqs):
        reqs = _settle(state)
    if any(map(_RETRACTIONS, reqs)):  # the scan runs in C; most states have none
        reqs = tuple(r.evolve(retractions=0) if r.retractions else r for r in reqs)
    running = spent_batch(state.running) if reduce and state.config.disable_overlap_schedule else state.running
    out = evolve(state, step_index=0, decisions=decisions, reqs=reqs, graphs=state.graphs.canonical(),
                 running=running, reqs_delta=None)
    if not reduce:
        return out, None
    if symmetric:
        return relabel(out)
    return compact_tree(out), None


def _kept_renamed(state: ModelState, reduce: bool, symmetric: bool,
                  keep: frozenset[str]) -> tuple[ModelState, Sequence[int] | None]:
    """:func:`canonical_renamed` without the erasures named in ``keep`` (a variant's own
    operations can read them: ``specstate.fuzz.reads``); kept apart from the built-in variants'
    path, which it leaves as fast as it was."""
    reduce_ = {e: reduce and e not in keep for e in ("settled", "extend-lens", "decisions", "tree", "ids")}
    counters = "step-counters" not in keep
    ds = kept_decisions(state.decisions) if reduce_["decisions"] else state.decisions
    decisions = tuple([_canonical_decision(d) if counters else _DECISIONS(d) for d in ds])
    reqs = state.reqs
    if reduce_["settled"] and any(r.done for r in reqs):
        reqs = _settle(state)
    if "retractions" not in keep and any(map(_RETRACTIONS, reqs)):
        reqs = tuple(r.evolve(retractions=0) if r.retractions else r for r in reqs)
    running = spent_batch(state.running) if reduce_["extend-lens"] and state.config.disable_overlap_schedule \
        else state.running
    graphs = state.graphs if "graph-writers" in keep else state.graphs.canonical()
    out = evolve(state, step_index=0 if counters else state.step_index, decisions=decisions, reqs=reqs,
                 graphs=graphs, running=running, reqs_delta=None)
    if symmetric and reduce_["ids"]:
        return relabel(out, tree=reduce_["tree"])
    return (compact_tree(out) if reduce_["tree"] else out), None


def _referenced(s: ModelState) -> set[int]:
    """Requests whose finished rows a later iteration still processes: the v2 family's pending
    and launched results (a result is processed one iteration after its batch ran, reading its
    rows' fields). A finished row of a v1 batch is only tested for ``live`` by the next
    ``filter_batch`` (the status stays)."""
    return set(s.overlap.result_rids())


def _released(r: Req) -> bool:
    """``r`` holds nothing any more: no KV slot (target or draft), no tree prefix, no lock."""
    return not (r.kv_allocated_len or r.draft_kv_len or r.cache_protected_len or r.last_node)


def kept_decisions(decisions: tuple[Decision, ...]) -> tuple[Decision, ...]:
    """The switch decisions the reduced search keeps: the last one. The state holds the last two,
    but the older is only ever read as ``stable-switch-decision``'s "previous decision" in the
    step that appends a new one, which drops it: by then it is the last one of the state before.
    By specstate's own code: a variant's own operation handed the state keeps both
    (``specstate.fuzz.reads``; issue 36's off-by-one read ``decisions[0]``)."""
    return decisions[-1:]


def _settle(s: ModelState) -> tuple[Req, ...]:
    """``s.reqs`` with every finished request that holds nothing and that no later iteration reads
    :func:`settled`; a finished row of the running batch (not filtered yet: admission's reserve
    reads its remaining new tokens first) as :func:`settled_row` in the v1 family, and kept whole in
    the overlap families (their result processing and retraction read more of a running row)."""
    held = _referenced(s)
    rows = frozenset(s.running.rids)
    if not s.config.disable_overlap_schedule:
        held, rows = held.union(rows), frozenset()
    return tuple([r if r.live or r.rid in held or not _released(r) else _SETTLED_ROW(r) if r.rid in rows
                  else _SETTLED(r) for r in s.reqs])


def spent_batch(b: ScheduleBatch) -> ScheduleBatch:
    """The running batch as the reduced search keeps it: once in ``DECODE`` mode (after
    ``prepare_for_decode``; ``merge_batch`` keeps it there), without the ``extend_lens`` of the
    prefill it began as. No operation reads them again: a decode batch is forwarded as a decode
    (draft, verify, fallback: modes whose forwards ``token-counts`` does not count by
    ``extend_lens``) or as a draft extend that brings its own (the accept lengths); a batch is
    forwarded as an extend only while in ``EXTEND`` or ``MIXED`` mode, and the running batch
    leaves ``DECODE`` only by being replaced (an empty one by the last prefill). The v1 family
    only: the overlap families copy the running batch into their pending result. Specstate's own
    operations only: a variant's own operation handed a batch or the state keeps them
    (``specstate.fuzz.reads``)."""
    if b.extend_lens is None or b.forward_mode is not ForwardMode.DECODE:
        return b
    return _SPENT_BATCH(b)


_SPENT_BATCH: BoundedMemo[ScheduleBatch, ScheduleBatch] = BoundedMemo(lambda b: b.evolve(extend_lens=None), 65_536)


def settled(r: Req) -> Req:
    """A finished or aborted request as the reduced search keeps it: its id, prompt length and
    token segments (a later arrival may share its prompt's tokens), as ``FINISHED``; lengths, KV
    counts, finish reason, flags, radix links and whether it was aborted from the queue
    (``ABORTED``) or finished reset: the model and the invariants test a request's status only for
    ``live`` (``Req.live``/``done``), never ``FINISHED`` against ``ABORTED``. Applied only to a request that holds nothing any more
    (no KV slot, no tree prefix or lock: a variant that leaks them keeps them visible) and that no
    pending v2 result names (the v2 family processes a result one iteration after its batch,
    reading the finished rows' fields: ``v2-commit-after-finish``). Nothing the model or the
    invariants do after that reads those fields (``tests/test_explore_reduce.py`` checks it:
    states equal but for them step to states equal but for them, with the same violations)."""
    return Req(rid=r.rid, prompt_len=r.prompt_len, max_new_tokens=1, status=ReqStatus.FINISHED, segments=r.segments)


def settled_row(r: Req) -> Req:
    """:func:`settled`, keeping what a finished row of the running batch shows until the next
    ``filter_batch`` drops it: its remaining new tokens, ``max_new_tokens - output_len``, which
    admission reserves for every row (``admission._start``), as ``max_new_tokens`` with no output."""
    return Req(rid=r.rid, prompt_len=r.prompt_len, max_new_tokens=r.max_new_tokens - r.output_len,
               status=ReqStatus.FINISHED, segments=r.segments)


_SETTLED: BoundedMemo[Req, Req] = BoundedMemo(settled, 65_536)
_SETTLED_ROW: BoundedMemo[Req, Req] = BoundedMemo(settled_row, 65_536)


#: a canonical decision -> the one object equal to it
_DECISIONS: BoundedMemo[Decision, Decision] = BoundedMemo(lambda d: d, 65_536)


def _canonical_decision(d: Decision) -> Decision:
    return _DECISIONS(evolve(d, step_index=-1) if d.step_index != -1 else d)


_RETRACTIONS = attrgetter("retractions")
ERASURE_BY_NAME = {e.name: e for e in ERASURES}


def default_alphabet(*, max_live: int = 3, max_arrivals: int = 4, prompt_len: int = 4,
                     max_new: tuple[int, ...] = (3, 6)) -> Alphabet:
    """Arrive (one per ``max_new``), Step (accept 1), Step (accept all), Step (EOS for the
    first running request), Abort (each live request). Marked ``symmetric``: it names request
    ids only through the state's structures, so a renaming of ids renames its actions
    (``specstate.fuzz.symmetry``); and ``commuting``: an arrival stays offered after an abort (the
    live count only falls), an abort of a live request after an arrival or another abort
    (``search.commuting``, the sleep sets)."""

    def actions(s: ModelState) -> list[Action]:
        live = [r.rid for r in s.live_reqs()]
        out: list[Action] = []
        if len(live) < max_live and len(s.reqs) < max_arrivals:
            out.extend(Arrive(prompt_len, m) for m in max_new)
        out.append(Step())
        out.append(Step(accept=(s.config.max_accept_len,) * max(len(live), 1)))
        running = [r for r in s.running.rids if s.req(r).live]
        if running:
            out.append(Step(eos=(running[0],)))
        out.extend(Abort(r) for r in live)
        return out

    actions.symmetric = True  # type: ignore[attr-defined]
    actions.commuting = True  # type: ignore[attr-defined]
    return actions


def is_symmetric(alphabet: Alphabet) -> bool:
    """Whether ``alphabet`` renames its actions with the state's request ids (``symmetric``
    attribute; ``default_alphabet``'s): the condition for the symmetry reduction."""
    return getattr(alphabet, "symmetric", False) is True


@dataclass
class ExploreResult:
    variant: str
    config: SpecConfig  #: after the variant's changes
    states: int
    transitions: int
    max_depth_reached: int
    elapsed_s: float
    complete: bool  #: the frontier emptied within the bounds (nothing left unexplored)
    counterexample: list[Action] | None = None  #: a shortest violating path, if any
    violations: list[Violation] = field(default_factory=list)
    graph: nx.DiGraph = field(default_factory=lambda: nx.DiGraph())
    witnesses: set[str] = field(default_factory=set)  #: ``outcome_witnesses`` of every transition
    #: SIGINT / SIGTERM stopped the search after it had found ``counterexample`` (the caller
    #: writes the trace, then re-raises this)
    interrupted: KeyboardInterrupt | None = None
    #: the erasures of the key this search did not make, and the variant's operations (or invariants)
    #: that can read them (``specstate.fuzz.reads.kept``; ``reads.reduction_notes`` words it)
    kept: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def states_per_s(self) -> float:
        return self.states / self.elapsed_s if self.elapsed_s > 0 else float("inf")


def explore(config: SpecConfig, variant: Variant | str, *, alphabet: Alphabet | None = None, max_depth: int = 12,
            max_states: int = 200_000, stop_at_first: bool = False, keep_graph: bool = True,
            on_node: Callable[[int, int, int], None] | None = None, jobs: int = 1,
            reduce: bool = False, por: bool | None = None) -> ExploreResult:
    """BFS from ``initial_state``; see the module doc for bounds and keys. ``on_node(states,
    transitions, depth)`` is called after each expanded node (progress). ``jobs > 1``: the same
    search on that many forked processes (``explore_parallel``; serial where ``fork`` is missing).
    ``reduce``: one node per class of equivalent states: finished requests' spent fields erased
    (:func:`settled`), the decode batch's spent ``extend_lens`` and the older switch decision,
    the radix tree's ids in content order and clock as ranks, and, for a symmetric alphabet
    (:func:`is_symmetric`), request ids renamed canonically (``specstate.fuzz.symmetry``); the
    counterexample is then renamed back into a trace that replays (``concrete_path``). The graph's
    nodes are then classes, its edges' labels name the representatives' ids. ``por`` (default:
    ``reduce`` without ``keep_graph``, whose graph shows every transition): sleep sets over the commuting arrivals and aborts (``search.independent``, where
    ``search.commuting`` accepts the variant's operations and the alphabet): the same nodes at the
    same depths, the same verdicts, fewer transitions (docs/fuzzing.md, "Sleep sets")."""
    from specstate.fuzz.explore_parallel import can_fork, parallel_search  # the parallel strategy, above this module

    v = as_variant(variant)
    cfg, ops = v.configure(config), v.ops()
    alphabet = alphabet or default_alphabet()
    readers = kept(ops)
    keep = frozenset(readers)
    symmetric = reduce and is_symmetric(alphabet) and "ids" not in keep
    sleep = ((reduce and not keep_graph) if por is None else por) and commuting(ops, alphabet)
    canon = functools.partial(canonical_renamed, reduce=reduce, symmetric=symmetric, keep=keep)
    start = canon(initial_state(cfg))[0]
    t0 = time.perf_counter()
    if jobs > 1 and can_fork():
        search = _Search(start, keep_graph, key=hash(start))
        complete, reached = parallel_search(search, start, ops, v, alphabet, canon, jobs=jobs, max_depth=max_depth,
                                            max_states=max_states, stop_at_first=stop_at_first, keep_graph=keep_graph,
                                            on_node=on_node, sleep=sleep)
    else:
        search = _Search(start, keep_graph)
        complete, reached = _serial_search(search, start, ops, v, alphabet, canon, max_depth=max_depth,
                                           max_states=max_states, stop_at_first=stop_at_first, on_node=on_node,
                                           sleep=sleep)
    if symmetric and search.found is not None:
        search.found = concrete_path(start, search.found, lambda s, a, d: checked_step(s, a, ops, v, d).state,
                                     functools.partial(canonical_renamed, reduce=True, symmetric=True, keep=keep))
    res = _result(v, config, cfg, search, time.perf_counter() - t0, complete)
    res.witnesses, res.interrupted = reached, search.interrupted
    res.kept = {e: r for e, r in readers.items() if reduce or not ERASURE_BY_NAME[e].reduce_only}
    return res


def _serial_search(search: _Search, start: ModelState, ops: Ops, v: Variant, alphabet: Alphabet,
                   canon: Callable[[ModelState], tuple[ModelState, Sequence[int] | None]], *, max_depth: int,
                   max_states: int, stop_at_first: bool, on_node: Callable[[int, int, int], None] | None,
                   sleep: bool = False) -> tuple[bool, set[str]]:
    """The search in this process, into ``search``: (whether the frontier emptied within the
    bounds, the witnesses reached). ``sleep``: with sleep sets (:class:`~specstate.fuzz.search.SleepSets`)."""
    frontier: deque[tuple[ModelState, int]] = deque([(start, 0)])
    reached: set[str] = set()
    sets = SleepSets(search, max_depth) if sleep else None
    with frozen_heap():  # the collector leaves torch and the modules alone during the search
        try:
            while frontier and len(search.parent) < max_states:
                state, node = frontier.popleft()
                if search.depth[node] >= max_depth:
                    continue
                asleep = sets.take(node) if sets is not None else frozenset()
                done: list[Action] = []  # the explored arrivals and aborts that reached an expanded node
                for a in alphabet(state):
                    if a in asleep:
                        continue
                    outcome = checked_step(state, a, ops, v, search.depth[node])
                    bad = bool(check_outcome(outcome))
                    reached |= outcome_witnesses(outcome)
                    after, perm = canon(outcome.state)
                    dst, new = search.merge(node, a, after, bad)
                    if new and not bad and search.depth[dst] < max_depth:  # a node at max_depth is never expanded
                        frontier.append((after, dst))
                    if sets is not None:
                        sets.into(node, dst, new, bad, sleepers(done, a, perm))
                        if is_env(a) and sets.covers(dst, bad):
                            done.append(a)
                if search.found is not None and stop_at_first:
                    break
                search.progress(node, on_node)
        except KeyboardInterrupt as e:  # keep what was found: the caller writes it, then re-raises
            if search.found is None:
                raise
            search.interrupted, frontier = e, deque([(start, 0)])
    return not frontier and len(search.parent) < max_states, reached


def sleepers(done: Sequence[Action], a: Action, perm: Sequence[int] | None) -> list[Action]:
    """The actions of ``done`` independent of ``a``, renamed by ``perm`` (the successor's renaming)."""
    out = [b for b in done if independent(b, a)]
    return [rename_action(b, perm) for b in out] if perm is not None and out else out


def _result(v: Variant, config: SpecConfig, cfg: SpecConfig, search: _Search, elapsed: float,
            complete: bool) -> ExploreResult:
    res = ExploreResult(v.name, cfg, len(search.parent), search.transitions, max(search.depth), elapsed, complete,
                        graph=search.graph if search.graph is not None else nx.DiGraph())
    if search.found is not None:
        res.counterexample = search.found
        res.violations = run_actions(config, v, search.found).violations
    return res


def shortest_violation(config: SpecConfig, variant: Variant | str, alphabet: Alphabet, *, max_depth: int,
                       invariant: str | None = None, max_states: int = 200_000) -> tuple[list[Action] | None, bool]:
    """A shortest path (over ``alphabet``, at most ``max_depth`` long) whose last step violates
    ``invariant`` (any invariant if ``None``); and whether the search was exhaustive."""
    v = as_variant(variant)
    cfg, ops = v.configure(config), v.ops()
    keep = frozenset(kept(ops))
    start = canonical(initial_state(cfg), keep=keep)
    search = _Search(start, keep_graph=False)
    frontier: deque[tuple[ModelState, int]] = deque([(start, 0)])
    while frontier:
        if len(search.parent) >= max_states:
            return None, False
        state, node = frontier.popleft()
        if search.depth[node] >= max_depth:
            continue
        for a in alphabet(state):
            outcome = checked_step(state, a, ops, v, search.depth[node])
            found = check_outcome(outcome)
            if found and (invariant is None or invariant in {f.invariant for f in found}):
                return search.path(node) + [a], True
            after = canonical(outcome.state, keep=keep)
            dst, new = search.add_key(node, a, after, bool(found), None)
            if new and not found:
                frontier.append((after, dst))
    return None, True


def fixed_alphabet(actions: Iterable[Action], *, live_aborts: bool = True, live_eos: bool = True) -> Alphabet:
    """An alphabet from a trace: its distinct arrivals and steps, plus an abort and an EOS
    step for every live request (rids are state-dependent)."""
    arrivals = sorted({a for a in actions if isinstance(a, Arrive)}, key=lambda a: (a.prompt_len, a.max_new_tokens))
    steps = sorted({a for a in actions if isinstance(a, Step) and not a.eos} | {Step()}, key=lambda a: a.accept)
    eos_shapes = sorted({a.accept for a in actions if isinstance(a, Step) and a.eos})

    def alphabet(s: ModelState) -> list[Action]:
        out: list[Action] = list(arrivals) + list(steps)
        live = [r.rid for r in s.live_reqs()]
        if live_eos and eos_shapes:
            out.extend(Step(accept=acc, eos=(r,)) for acc in eos_shapes for r in live)
        if live_aborts and any(isinstance(a, Abort) for a in actions):
            out.extend(Abort(r) for r in live)
        return out

    return alphabet


__all__ += ["shortest_violation", "fixed_alphabet", "canonical_renamed", "is_symmetric"]
if __name__ == "__main__":  # pragma: no cover - ``python -m specstate.fuzz.explore`` smoke run
    r = explore(DEFAULT_EXPLORE_CONFIG, sys.argv[1] if len(sys.argv) > 1 else "naive-threshold")
    print(r.states, r.transitions, r.counterexample)
