"""``prove``: every bound ``1 .. max_bs``, every capture list of the proof, every script.

Owns: the run of a proof (:func:`prove`) and its result (:class:`ProveResult`). For each
capture list (``_abstraction.capture_lists``) and each bound ``b`` in increasing order it runs
the paths of ``_scripts.Ramp.bound`` on the model, with every invariant checked after every
step (``check.checked_step`` + ``invariants.check_outcome``, as ``specstate reproduce`` applies
them). A script's *bound* is the most live requests along its path (``explore --max-bs``
counts the same); the first violation of a bound ends that capture list, and every list runs
only through the smallest failing bound found so far, so the failure reported is one of the
smallest failing bound (the first list's on a tie).

``jobs > 1`` runs the capture lists in forked processes sharing the limit; the verdict and the
failure reported are the same, a list stopped early may stop at another bound.

A tree's prefix runs once (``Node``): the ramp's state at every bound and each jump chain's
newest link are kept for the larger bounds that continue from them; nothing else outlives its
bound.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Callable

from specstate.check import checked_step
from specstate.invariants import Violation, WitnessTracker, check_outcome
from specstate.model import Action, ModelState, SpecConfig, Variant, as_variant, get_variant, initial_state
from specstate.model.tensors import after_fork
from specstate.prove._abstraction import CAPTURE_LIST_NAMES, capture_lists, representatives
from specstate.model.bs_compare import recording
from specstate.prove._intervals import Points, checked_bounds, derive
from specstate.prove._scripts import Lengths, Node, Ramp

__all__ = ["Failure", "ListVerdict", "ProveResult", "prove", "prove_config"]


@dataclass(frozen=True)
class Failure:
    bound: int  #: most live requests along the failing path
    script: str  #: the node path from the nearest ramp node (``R6/shrink5``, ``R1+5/jump1``)
    capture_list: str
    config: SpecConfig  #: the config the trace replays under (before the variant's changes)
    actions: tuple[Action, ...]  #: from the initial state to the violating step
    violations: tuple[Violation, ...]


@dataclass
class ListVerdict:
    """One capture list's part of a proof."""

    name: str
    capture: tuple[int, ...]  #: the capture list after the config's filtering (``SpecConfig.cuda_graph_bs``)
    checked_up_to: int = 0  #: the largest bound every script of which ran
    failure: Failure | None = None
    unreached: str | None = None  #: why ``unreached_bs`` could not be checked, and what to change
    unreached_bs: int | None = None  #: the bound the ramp could not reach (the proof stops below it)
    runs: int = 0  #: scripts (tree nodes) run
    steps: int = 0  #: actions applied
    elapsed_s: float = 0.0
    cpu_s: float = 0.0  #: CPU seconds of the process that ran it (``time.process_time``)
    witnesses: set[str] = field(default_factory=set)
    intervals: int = 0  #: the bounds the intervals check (``_intervals.checked_bounds``)
    bounds_run: int = 0  #: the bounds whose scripts ran (every bound under ``exhaustive``)
    restarts: int = 0  #: how often a constant the intervals lacked restarted the list
    points: list[int] = field(default_factory=list)  #: the constants the intervals were cut at

    @property
    def proved_up_to(self) -> int:
        """The largest bound proved: ``checked_up_to``, below the unreached bound if any."""
        return self.checked_up_to if self.unreached_bs is None else min(self.checked_up_to, self.unreached_bs - 1)


@dataclass
class ProveResult:
    variant: str
    max_bs: int
    lists: list[ListVerdict]
    interrupted: KeyboardInterrupt | None = None
    elapsed_s: float = 0.0  #: wall-clock seconds of the whole proof
    exhaustive: bool = False  #: every bound's scripts ran (``--exhaustive``), not only the intervals'

    @property
    def failure(self) -> Failure | None:
        """A failure of the smallest failing bound (the first list's on a tie)."""
        found = [v.failure for v in self.lists if v.failure is not None]
        return min(found, key=lambda f: f.bound) if found else None

    @property
    def unreached(self) -> ListVerdict | None:
        """The first capture list whose proof stopped at a bound it could not reach."""
        return next((v for v in self.lists if v.unreached is not None), None)

    @property
    def holds(self) -> bool:
        return self.failure is None and self.interrupted is None and self.unreached is None

    @property
    def steps(self) -> int:
        return sum(v.steps for v in self.lists)


    @property
    def cpu_s(self) -> float:
        return sum(v.cpu_s for v in self.lists)

    def verdict(self) -> str:
        f = self.failure
        if f is not None:
            return (f"fails at bs = {f.bound}: {f.violations[0].invariant} (capture list {f.capture_list}, "
                    f"script {f.script})")
        if self.interrupted is not None:
            return "interrupted"
        u = self.unreached
        if u is not None:
            return f"inconclusive: holds for bs <= {u.proved_up_to} under capture list {u.name}; {u.unreached}"
        return f"holds for all bs <= {self.max_bs}"

    @property
    def inconclusive(self) -> bool:
        """No failure, not interrupted, but a bound the proof could not reach (``unreached``)."""
        return self.failure is None and self.interrupted is None and self.unreached is not None


def prove_config(config: SpecConfig, max_bs: int, capture: tuple[int, ...] | None) -> SpecConfig:
    """``config`` with ``max_running_requests = max_bs`` and the capture list ``capture``
    (``None``: the config's own)."""
    cfg = config.with_(max_running_requests=max_bs)
    return cfg.with_(cuda_graph_bs_override=capture) if capture is not None else cfg


class _Unreached(Exception):
    """The ramp's decode at bound ``b`` did not run ``b`` rows (the KV pool or the admission
    budget cannot hold ``b`` requests of the proof's lengths): the proof stops below ``b``.
    Control flow inside a proof only (``ListVerdict.unreached`` says it), never raised to a caller."""

    def __init__(self, bound: int, kind: str, rows: int, config: SpecConfig | None = None) -> None:
        super().__init__(unreached_reason(bound, kind, rows, config))
        self.bound = bound


def unreached_reason(bound: int, kind: str, rows: int, config: SpecConfig | None) -> str:
    """Why the ramp did not reach ``bound`` and what to change (``config``: the proof's)."""
    head = (f"bs = {bound} not reached: the ramp's last step ran a {kind} batch of {rows} rows where a decode of "
            f"{bound} was expected")
    if config is None:
        return head
    prompt = Lengths().prompt_len
    if kind == "prefill" and config.chunked_prefill_size < bound * (prompt + 1):
        why = (f"one chunk of --chunked-prefill-size {config.chunked_prefill_size} holds at most "
               f"{max(1, config.chunked_prefill_size // prompt)} of the proof's {prompt}-token prompts, so the ramp "
               f"was still admitting requests where its scripts expect all {bound} decoding")
        change = (f"raise --chunked-prefill-size (e.g. {max(bound * (prompt + 1), 512)}) or prove up to "
                  f"--max-bs {bound - 1}")
    else:
        why = (f"the admission budget (KV pool {config.target_kv_pool_size} slots, --max-prefill-tokens "
               f"{config.max_prefill_tokens}, --schedule-conservativeness {config.schedule_conservativeness}) "
               f"does not hold {bound} requests of the proof's lengths")
        change = f"raise --max-total-tokens or prove up to --max-bs {bound - 1}"
    return f"{head}: {why}; not a violation: the bounds above were not judged ({change})"


class _Executor:
    """Runs the path trees of one variant under one config; keeps the states later bounds continue from."""

    def __init__(self, config: SpecConfig, variant: Variant | str, verdict: ListVerdict) -> None:
        self.variant = as_variant(variant)
        self.base = config
        self.config = self.variant.configure(config)
        self.ops = self.variant.ops()
        self.family = self.variant.engine_family
        self.verdict = verdict
        self.kept: dict[Node, tuple[ModelState, int, WitnessTracker]] = {}

    def run(self, root: Node, keep: set[Node], label: str) -> Failure | None:
        """Run ``root``'s subtree; the end states of the nodes in ``keep`` are kept for later
        bounds (``root.parent``'s must be), every other one is dropped."""
        if root.parent is None:
            start = (initial_state(self.config), 0, WitnessTracker())
        else:
            start = self.kept[root.parent]
        stack = [(root, start)]
        while stack:
            node, (state, live, tracker) = stack.pop()
            done = self._run_node(node, state, live, _copy(tracker), label)
            if isinstance(done, Failure):
                return done
            if node in keep:
                self.kept[node] = done
            stack.extend((c, done) for c in reversed(node.children))
        return None

    def _run_node(self, node: Node, state: ModelState, live: int, tracker: WitnessTracker,
                  label: str) -> "tuple[ModelState, int, WitnessTracker] | Failure":
        self.verdict.runs += 1
        o = None
        for a in node.actions:
            o = checked_step(state, a, self.ops, self.variant, state.step_index)
            self.verdict.steps += 1
            state = o.state
            live = max(live, len(state.live_rids()))  # the state's live index: no scan of every request
            tracker.observe(o)
            found = check_outcome(o)
            if found:
                actions = tuple(node.path()[: state.step_index])
                return Failure(live, node.name(), label, self.base, actions, tuple(found))
        if node.reaches is not None and (o is None or o.batch_kind != "decode" or len(o.batch_rids) != node.reaches):
            raise _Unreached(node.reaches, o.batch_kind if o else "no", len(o.batch_rids) if o else 0, self.base)
        self.verdict.witnesses |= tracker.reached
        return state, live, tracker


def _copy(t: WitnessTracker) -> WitnessTracker:
    """A branch's own tracker (the witnesses follow one path, as in a ``Run``)."""
    return copy.deepcopy(t)


class _Limit:
    """The largest bound still worth running: the smallest failing bound found so far (every
    list runs through it, so a tie at that bound is broken by list order, not by timing).
    ``value`` is a ``multiprocessing.Value`` when lists run in processes, else a plain cell."""

    def __init__(self, max_bs: int, shared: object = None) -> None:
        self.shared = shared
        self._value = max_bs

    def get(self) -> int:
        return self.shared.value if self.shared is not None else self._value  # type: ignore[attr-defined]

    def lower(self, bound: int) -> None:
        if self.shared is None:
            self._value = min(self._value, bound)
            return
        with self.shared.get_lock():  # type: ignore[attr-defined]
            self.shared.value = min(self.shared.value, bound)  # type: ignore[attr-defined]


class _Restart(Exception):
    """A bound met a constant or a capture list the intervals lacked, which adds a checked bound
    below it: the list starts again with ``points``. Control flow inside a proof only."""

    def __init__(self, points: Points) -> None:
        super().__init__("restart")
        self.points = points


def _prove_list(config: SpecConfig, variant: Variant | str, name: str, capture: tuple[int, ...] | None, max_bs: int,
                limit: _Limit, lengths: Lengths, on_bound: Callable[[str, int], None] | None,
                exhaustive: bool = False) -> ListVerdict:
    """Bounds ``1 ..`` ``limit`` under ``capture``, in the proof's config for ``max_bs``: the checked
    bounds of the intervals (``_intervals``), or every bound (``exhaustive``)."""
    cfg = prove_config(config, max_bs, capture)
    t0, c0 = time.perf_counter(), time.process_time()
    points, restarts, spent = None, 0, (0, 0)
    while True:
        ex = _Executor(cfg, variant, ListVerdict(name, ()))
        points = points or derive(ex.config, max_bs, ex.family)
        ex.verdict.runs, ex.verdict.steps, ex.verdict.restarts = spent[0], spent[1], restarts
        try:
            return _run_list(ex, max_bs, limit, lengths, on_bound if not restarts else None, points, exhaustive)
        except _Restart as e:
            points, restarts = e.points, restarts + 1
            spent = (ex.verdict.runs, ex.verdict.steps)
        finally:
            ex.verdict.elapsed_s = time.perf_counter() - t0
            ex.verdict.cpu_s = time.process_time() - c0


def _run_list(ex: _Executor, max_bs: int, limit: _Limit, lengths: Lengths,
              on_bound: Callable[[str, int], None] | None, points: Points, exhaustive: bool) -> ListVerdict:
    name = ex.verdict.name
    checked = checked_bounds(ex.config, points, max_bs, ex.family)
    ex.verdict.capture = ex.config.cuda_graph_bs
    ex.verdict.intervals = len(checked)
    ramp = Ramp(ex.config, max_bs, lengths, checked)
    for b in range(1, max_bs + 1):
        if b > limit.get():
            break
        run = exhaustive or b in checked
        with recording() as rec:
            try:
                found = _prove_bound(ex, b, ramp, name, run)
            except _Unreached as e:
                ex.verdict.unreached, ex.verdict.unreached_bs = str(e), e.bound
                break
        grown = points.missing(rec.constants, rec.captures, max_bs)
        if grown is not None:
            more = checked_bounds(ex.config, grown, max_bs, ex.family)
            if {x for x in more if x <= b} != {x for x in checked if x <= b}:
                raise _Restart(grown)
            points, checked = grown, more
            ramp.spine = sorted(more)
        if found is not None:
            ex.verdict.failure = found
            limit.lower(found.bound)
            break
        ex.verdict.bounds_run += run
        ex.verdict.checked_up_to = b
        if on_bound is not None:
            on_bound(name, b)
    ex.verdict.points = sorted(points.constants)
    return ex.verdict


def _prove_bound(ex: _Executor, b: int, ramp: Ramp, name: str, run: bool = True) -> Failure | None:
    """Every root of bound ``b`` (none when not ``run``); the shortest failing path of the bound, if any."""
    shrink_to, jump_from = representatives(ex.config, b, ex.family) if run else ((), ())
    roots = ramp.bound(b, shrink_to, jump_from, run)
    keep = ramp.running()
    best: Failure | None = None
    for root in roots:
        found = ex.run(root, keep, name)
        if found is not None and (best is None or (found.bound, len(found.actions)) < (best.bound, len(best.actions))):
            best = found
    kept = ramp.kept()
    ex.kept = {n: s for n, s in ex.kept.items() if n in kept}  # older chain links, this bound's off-spine nodes
    return best


def prove(config: SpecConfig, variant: str, max_bs: int, *, lists: tuple[str, ...] = CAPTURE_LIST_NAMES,
          lengths: Lengths = Lengths(), on_bound: Callable[[str, int], None] | None = None,
          jobs: int = 1, exhaustive: bool = False) -> ProveResult:
    """Run the proof of ``variant`` for bounds ``1 .. max_bs`` under each capture list of
    ``lists`` (``_abstraction.capture_lists``); ``on_bound(list, b)`` after each bound that held
    (in this process only); ``jobs > 1``: the lists in that many processes (forked);
    ``exhaustive``: every bound's scripts, not only the intervals' (``_intervals``)."""
    v = as_variant(variant)  # an unknown name fails before any work; the object travels from here
    result = ProveResult(v.name, max_bs, [], exhaustive=exhaustive)
    todo = list(capture_lists(config, max_bs, lists).items())
    t0 = time.perf_counter()
    try:
        if jobs > 1 and len(todo) > 1:
            # a registered variant travels to the workers by name (nothing to pickle), another as the object
            sent = v.name if _registered(v) else v
            result.lists = _in_processes(config, sent, max_bs, todo, lengths, jobs, exhaustive)
        else:
            limit = _Limit(max_bs)
            for name, capture in todo:
                result.lists.append(_prove_list(config, v, name, capture, max_bs, limit, lengths, on_bound,
                                                exhaustive))
    except KeyboardInterrupt as e:
        result.interrupted = e
    result.elapsed_s = time.perf_counter() - t0
    return result


def _registered(v: Variant) -> bool:
    from specstate.errors import UnknownName

    try:
        return get_variant(v.name) is v
    except UnknownName:
        return False


_SHARED: object = None  # the forked workers' shared limit


def _init_worker(shared: object) -> None:
    import signal

    global _SHARED
    _SHARED = shared
    # SIGINT / SIGTERM end a worker at once: the parent's handlers (inherited by the fork) would
    # raise inside the pool's worker loop, which reports the exception and takes the next list
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    after_fork()  # torch on one thread: the parent's OpenMP team does not survive the fork


def _list_job(args: tuple) -> ListVerdict:
    config, variant, name, capture, max_bs, lengths, exhaustive = args
    return _prove_list(config, variant, name, capture, max_bs, _Limit(max_bs, _SHARED), lengths, None, exhaustive)


def _in_processes(config: SpecConfig, variant: str, max_bs: int, todo: list, lengths: Lengths,
                  jobs: int, exhaustive: bool) -> list[ListVerdict]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")
    shared = ctx.Value("i", max_bs)
    pool = ProcessPoolExecutor(min(jobs, len(todo)), mp_context=ctx, initializer=_init_worker, initargs=(shared,))
    try:
        out = list(pool.map(_list_job, [(config, variant, n, c, max_bs, lengths, exhaustive) for n, c in todo]))
    except BaseException:  # interrupted (or a worker died): stop the workers now, not after their lists
        _stop(pool)
        raise
    pool.shutdown()
    return out


def _stop(pool: object) -> None:
    """End ``pool``'s workers at once (``shutdown(wait=True)`` would let each finish its list:
    43-47 s after a SIGINT on ``prove --exhaustive --jobs 2``)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)  # type: ignore[attr-defined]
    for proc in procs:
        proc.join(timeout=2)
