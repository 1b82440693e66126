"""``explore`` on several cores, with the serial search's result (``explore(..., jobs=N)``).

Owns no model state. The serial search (:func:`specstate.fuzz.explore.explore`) pops its FIFO
frontier in node-id order, and the expansion of a node (every action of the alphabet, each
step checked against every invariant, the successor made canonical) depends on that node's
state alone. So the expansions can run anywhere, ahead of time, as long as their results are
*merged* in node-id order: the merge (the seen-set, node ids, parents, the graph, the first
counterexample, ``max_states``, ``stop_at_first``) is the serial loop itself, fed by results
instead of by ``checked_step``.

The search runs level by level (every node of one depth, then the next). ``jobs`` forked
worker processes hold the states; the parent holds none:

- a worker expands the nodes it holds and sends back, per transition, the action, the
  successor's *fingerprint* (``hash`` of the canonical state; forked processes share
  ``PYTHONHASHSEED``), whether the step violated an invariant, and its label (for the graph);
  it keeps the successors until the parent says which ones are new;
- the parent merges the level in node-id order, deduplicating by fingerprint, and tells each
  worker which of its successors to keep as which new node; the next level's nodes stay with
  the worker that made them, except that the fuller worker hands some to the emptier one
  (pickled in one batch: the states share their config and most of their values).

Fingerprints instead of states are what TLC does: the parent's seen-set holds 8-byte hashes,
and a state is dropped from memory once it is expanded. Two different states with one hash
would merge (the serial search tells them apart by equality); at 64 bits the chance is about
``n**2 / 2**65`` for ``n`` states (3e-10 for 200,000), and ``tests/test_explore_parallel.py``
checks that the parallel search finds the serial one's states, transitions and counterexample.

A worker holds its states compressed (:class:`_Store`): pickled together in chunks of a few
hundred, where the states' shared values (the config, most requests, the tree) are written
once, then ``zlib``-compressed, about 30 bytes a state instead of about 5 KiB as objects; a chunk
is decoded when its states are expanded, in node order. That, and not keeping the last level's
states (they are never expanded), keeps ``explore --depth 12`` within a few hundred MiB.

Where ``fork`` is missing (not Linux) the serial search runs.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import zlib
from array import array
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from specstate.check import checked_step
from specstate.fuzz.search import SleepSets, independent, is_env, state_label
from specstate.fuzz.symmetry import rename_action
from specstate.errors import EnvironmentProblem
from specstate.heap import frozen_heap
from specstate.invariants import check_outcome, outcome_witnesses
from specstate.model import Action, ModelState, Ops, Variant
from specstate.model.tensors import after_fork, warm

if TYPE_CHECKING:
    from specstate.fuzz.search import Alphabet, _Search

Canon = Callable[[ModelState], "tuple[ModelState, Any]"]  #: the canonical state and the renaming applied (or None)

__all__ = ["can_fork", "default_jobs", "parallel_search", "worker_start"]


class _Reports(NamedTuple):
    """One worker's expansion of its nodes of a level, compact (about 15 bytes a transition):
    per node its id and transition count; per transition the action (an index into the worker's
    action table), the successor's fingerprint, whether it violated an invariant and (for the
    graph) the successor's label."""

    nodes: array  #: node ids, ascending
    counts: array  #: transitions per node
    actions: array  #: action-table index per transition
    fps: array  #: successor fingerprint per transition
    bad: bytearray  #: 1 where the transition violated an invariant
    labels: list[str] | None  #: successor labels (``keep_graph``)
    new_actions: list[Action]  #: the action table's entries added by this expansion, in index order
    #: with sleep sets: per transition, the node's earlier explored arrivals and aborts independent of
    #: it, as (their transition's index in the node, the action-table index of the action renamed
    #: into the successor's ids); the parent keeps those whose successor is expanded
    sleepers: list[tuple[tuple[int, int], ...]] | None = None


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def default_jobs() -> int:
    """Both cores of the 2-core machines this runs on, at most 2 (``explore`` and the graph's
    sweep: their work comes in levels and generations, whose barriers leave more cores idle)."""
    return max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


class _Failure(NamedTuple):
    """A worker's expansion of ``node`` raised ``error`` (the parent raises it when its merge
    reaches ``node``, where the serial search would have raised it)."""

    node: int
    error: BaseException


def worker_start() -> None:
    """What a forked search process (this search's, the graph's sweep's) runs first. Ctrl-C is
    the parent's, which ends the workers; SIGTERM (the parent's, or a pool's) kills at once: the
    CLI's handlers (``_cli_support``), inherited through ``fork``, would turn it into an exception
    inside a task, which a pool reports and outlives. Torch on one thread
    (:func:`~specstate.model.tensors.after_fork`): the parent's OpenMP team does not survive the
    fork."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if "torch" in sys.modules:  # (``_warm``: under SPECSTATE_TORCH=always) else a torch imported here has a fresh team
        after_fork()


@dataclass
class _Expansion:
    """One level's expansion in a worker: each node's successors stepped, checked, fingerprinted
    and reported; a successor whose fingerprint is new is kept in ``pending`` (``_worker``)."""

    ops: Ops
    variant: Variant
    alphabet: "Alphabet"
    canon: Canon
    depth: int
    keep: bool  #: the successors may be expanded (they are not at the search's depth bound)
    known: set[int]
    pending: "_Store"
    action_ids: dict[Action, int]
    rep: "_Reports"
    reached: set[str]

    def node(self, node: int, state: ModelState, asleep: "frozenset[Action]" = frozenset()) -> int:
        """The successors of ``state`` reported (but for the actions in ``asleep``); how many."""
        rep, n = self.rep, 0
        env: list[tuple[int, Action]] = []  # (transition index, action): the arrivals and aborts explored
        for a in self.alphabet(state):
            if a in asleep:
                continue
            outcome = checked_step(state, a, self.ops, self.variant, self.depth)
            bad = bool(check_outcome(outcome))
            self.reached |= outcome_witnesses(outcome)
            after, perm = self.canon(outcome.state)
            fp = hash(after)
            if fp not in self.known:  # reported before in this level: never new
                self.known.add(fp)
                if self.keep:
                    self.pending.put((node, n), after)
            aid = self._aid(a)
            if rep.sleepers is not None:
                rep.sleepers.append(tuple([(j, self._aid(rename_action(b, perm) if perm is not None else b))
                                           for j, b in env if independent(b, a)]))
                if is_env(a) and not bad:
                    env.append((n, a))
            rep.actions.append(aid)
            rep.fps.append(fp)
            rep.bad.append(bad)
            if rep.labels is not None:
                rep.labels.append(state_label(after))
            n += 1
        return n

    def _aid(self, a: Action) -> int:
        aid = self.action_ids.get(a)
        if aid is None:
            aid = self.action_ids[a] = len(self.action_ids)
            self.rep.new_actions.append(a)
        return aid


class _Store:
    """States by key, compressed in chunks of :attr:`CHUNK` (module doc): ``put`` in the order they
    will be taken (about), ``take`` each once. A few decoded chunks are cached: a worker takes its
    own states and the ones it adopted in one node order, two interleaved runs of chunks."""

    CHUNK = 256

    def __init__(self) -> None:
        self.where: dict[Any, tuple[int, int]] = {}  #: key -> (chunk, index in it)
        self.chunks: list[bytes | None] = []
        self.open: list[ModelState] = []  #: the chunk being filled (not compressed yet)
        self._decoded: dict[int, list[ModelState]] = {}

    def __len__(self) -> int:
        return len(self.where)

    def put(self, key: Any, state: ModelState) -> None:
        self.where[key] = (len(self.chunks), len(self.open))
        self.open.append(state)
        if len(self.open) >= self.CHUNK:
            self._seal()

    def _seal(self) -> None:
        if self.open:
            self.chunks.append(zlib.compress(pickle.dumps(self.open, protocol=pickle.HIGHEST_PROTOCOL), 1))
            self.open = []

    def take(self, key: Any) -> ModelState:
        c, i = self.where.pop(key)
        if c == len(self.chunks):
            state = self.open[i]
        else:
            got = self._decoded.get(c)
            if got is None:
                if len(self._decoded) >= 4:
                    del self._decoded[next(iter(self._decoded))]
                got = self._decoded[c] = pickle.loads(zlib.decompress(self.chunks[c]))  # type: ignore[arg-type]
            state = got[i]
        if not self.where:
            self.clear()
        return state

    def rekeyed(self, pairs: list[tuple[Any, Any]]) -> "_Store":
        """A store holding this one's states under new keys (``(old, new)``; the others dropped),
        sharing the chunks (no state is decoded)."""
        self._seal()
        out = _Store()
        out.chunks, out.where = self.chunks, {new: self.where[old] for old, new in pairs}
        self.where = {}
        self.clear()
        return out

    def clear(self) -> None:
        self.where, self.chunks, self.open, self._decoded = {}, [], [], {}


def _worker(conn: Connection, held: dict[int, ModelState], ops: Ops, variant: Variant, alphabet: "Alphabet",
            canon: Canon, keep_graph: bool, sleep: bool = False) -> None:
    """A worker's loop: ``("expand", blobs, nodes, depth, keep, sleeps)`` -> reports (``sleeps``:
    node -> its sleep set, where not empty) (``keep``: hold the new
    successors for the parent's answer; not at the last level, whose successors are never
    expanded); ``("keep", keeps, give)`` -> the given states, pickled; ``("done",)`` -> the
    witnesses it reached.

    A successor is kept until the parent's answer unless this worker reported its fingerprint
    earlier in this level (``known``, one level's; the parent merges a worker's reports in the
    order they were made). One that is a node already is kept too and dropped at the answer: the
    states are held compressed, so that costs less than a set of every fingerprint in each worker
    (which it was, about 10 MiB a worker at depth 12)."""
    worker_start()
    pending = _Store()  # (node, action index) -> a new successor, until the parent's answer
    action_ids: dict[Action, int] = {}  # this worker's action table (the parent keeps a copy)
    known: set[int] = set()  # fingerprints reported in this level
    reached: set[str] = set()
    store = _Store()  # node -> state, the level to expand
    for node, state in held.items():
        store.put(node, state)
    del held
    while True:
        msg = conn.recv()
        if msg[0] == "expand":
            _, blobs, nodes, depth, keep, sleeps = msg
            error: _Failure | None = None
            for blob in blobs:
                for node, state in sorted(pickle.loads(blob).items()):
                    store.put(node, state)
            pending.clear()
            known.clear()
            rep = _Reports(array("q"), array("H"), array("I"), array("q"), bytearray(), [] if keep_graph else None, [],
                           [] if sleep else None)
            expand = _Expansion(ops, variant, alphabet, canon, depth, keep, known, pending, action_ids, rep, reached)
            for node in nodes:
                try:
                    n = expand.node(node, store.take(node), sleeps.get(node, frozenset()))
                except Exception as e:  # the parent raises it where the serial search would
                    error = _Failure(node, e)
                    break
                rep.nodes.append(node)
                rep.counts.append(n)
            conn.send((rep, _picklable(error)))
        elif msg[0] == "keep":
            _, keeps, give = msg
            store = pending.rekeyed([((node, i), new) for node, i, new in keeps])
            pending = _Store()
            conn.send(pickle.dumps({n: store.take(n) for n in give}, protocol=pickle.HIGHEST_PROTOCOL) if give else None)
        else:
            conn.send(reached)
            return


def _picklable(error: _Failure | None) -> _Failure | None:
    if error is None:
        return None
    try:
        pickle.dumps(error.error)
        return error
    except Exception:  # a user's exception that does not pickle: its type and text
        return _Failure(error.node, RuntimeError(f"{type(error.error).__name__}: {error.error}"))


def _warm(start: ModelState, ops: Ops, variant: Variant, alphabet: "Alphabet", canon: Canon) -> None:
    """The start state's successors made once in the parent, before the fork, so that what the
    model imports and builds at its first steps (the operations' caches; torch, about 150 MiB of a
    process's memory, only under ``SPECSTATE_TORCH=always``: ``tensors.warm``, else the shape rules
    never import it, and a worker whose state crashes in torch imports it there) is the parent's,
    shared by every worker instead of made again in each one."""
    warm()  # torch now if every tensor op runs it (``SPECSTATE_TORCH=always``), else nothing

    for a in alphabet(start):
        canon(checked_step(start, a, ops, variant, 0).state)


class _Workers:
    """The forked processes and the parent's ends of their pipes."""

    def __init__(self, jobs: int, start: ModelState, ops: Ops, variant: Variant, alphabet: "Alphabet", canon: Canon,
                 keep_graph: bool, sleep: bool = False) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        for w in range(jobs):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, daemon=True,
                            args=(child, {0: start} if w == 0 else {}, ops, variant, alphabet, canon, keep_graph, sleep))
            p.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(p)

    def ask(self, messages: list[tuple]) -> list[Any]:
        """Send each worker its message; each one's answer. A worker that died (killed, out of
        memory) is an :class:`EnvironmentProblem` that says which and how."""
        try:
            for c, m in zip(self.conns, messages):
                c.send(m)
            return [c.recv() for c in self.conns]
        except (EOFError, OSError) as e:
            for p in self.procs:
                p.join(timeout=1)
            dead = [f"worker {w} (pid {p.pid}) exited with code {p.exitcode}" for w, p in enumerate(self.procs)
                    if p.exitcode is not None]
            raise EnvironmentProblem(f"Expected every explore search process to answer but {', '.join(dead) or type(e).__name__} "
                                     f"(killed, or out of memory?); rerun with --jobs 1 (one process, the same "
                                     f"result) or a smaller --max-states") from None

    def close(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join()
        for c in self.conns:
            c.close()


def parallel_search(search: "_Search", start: ModelState, ops: Ops, variant: Variant, alphabet: "Alphabet",
                    canon: Canon, *, jobs: int, max_depth: int, max_states: int, stop_at_first: bool, keep_graph: bool,
                    on_node: Callable[[int, int, int], None] | None, sleep: bool = False) -> tuple[bool, set[str]]:
    """The serial loop of ``explore`` into ``search`` (an ``explore._Search`` keyed by
    fingerprints, holding the start as node 0), fed by ``jobs`` workers (``canon``: the
    canonical form of a successor): (whether the frontier emptied within the bounds, the
    witnesses reached; ``sleep``: with sleep sets, kept by the parent, :class:`SleepSets`). A ``KeyboardInterrupt`` after a counterexample was found is kept in
    ``search.interrupted`` (the caller raises it again after writing the trace)."""
    complete = True
    _warm(start, ops, variant, alphabet, canon)  # before the heap is frozen: what it imports is frozen too
    with frozen_heap():
        workers = _Workers(jobs, start, ops, variant, alphabet, canon, keep_graph, sleep)
        sets = SleepSets(search, max_depth) if sleep else None
        try:
            owner: dict[int, int] = {0: 0}  # node -> the worker holding its state
            actions: dict[Action, Action] = {}  # one object per distinct action (the parent links keep them)
            tables: list[list[Action]] = [[] for _ in range(jobs)]  # each worker's action table
            level: list[int] = [0]
            blobs: list[list[bytes]] = [[] for _ in range(jobs)]
            # nodes at max_depth: the serial search pops them and skips them
            while level and search.depth[level[0]] < max_depth:
                depth = search.depth[level[0]]
                reps, errors = _expand(workers, blobs, level, owner, depth, depth + 1 < max_depth, sets)
                for w, rep in enumerate(reps):
                    tables[w].extend(actions.setdefault(a, a) for a in rep.new_actions)
                merged = _merge(search, level, reps, tables, owner, errors, max_states=max_states,
                                stop_at_first=stop_at_first, on_node=on_node, sets=sets)
                if merged.stopped:
                    complete = not merged.left
                    break
                if depth + 1 >= max_depth:  # the next level is never expanded: its states were not kept
                    break
                blobs = _hand_over(workers, merged.keeps, owner, jobs)
                for n in level:
                    del owner[n]
                level = merged.next
            reached: set[str] = set()
            for r in workers.ask([("done",)] * jobs):
                reached |= r
        except KeyboardInterrupt as e:
            if search.found is None:
                raise
            search.interrupted = e
            return False, set()
        finally:
            workers.close()
    return complete and len(search.parent) < max_states, reached


class _Merged(NamedTuple):
    """A level merged: the next level's nodes, per worker the successors it keeps as which node
    (``(node, action index, new node)``); ``stopped``: the merge
    ended early (``max_states``, ``stop_at_first``), ``left``: with nodes not yet expanded."""

    next: list[int]
    keeps: list[list[tuple[int, int, int]]]
    stopped: bool = False
    left: bool = False


def _merge(search: "_Search", level: list[int], reps: list[_Reports], tables: list[list[Action]],
           owner: dict[int, int], errors: dict[int, BaseException], *, max_states: int, stop_at_first: bool,
           on_node: Callable[[int, int, int], None] | None, sets: SleepSets | None = None) -> _Merged:
    """The workers' reports of ``level`` merged into ``search`` in node-id order, as the serial
    search would have met them (each worker's reports come in the order of its nodes)."""
    cursor = [(0, 0)] * len(reps)  # per worker: (its next node's index, that node's first transition)
    out = _Merged([], [[] for _ in reps])
    for k, node in enumerate(level):
        if len(search.parent) >= max_states:
            return out._replace(stopped=True, left=True)
        if node in errors:
            raise errors[node]
        w = owner[node]
        rep, table = reps[w], tables[w]
        at, first = cursor[w]
        count = rep.counts[at]
        cursor[w] = (at + 1, first + count)
        covers: list[bool] = []  # per transition of the node: its successor is expanded (SleepSets.covers)
        for i in range(count):
            j = first + i
            fp, bad = rep.fps[j], bool(rep.bad[j])
            dst, new = search.merge(node, table[rep.actions[j]], fp, bad, rep.labels[j] if rep.labels is not None else None)
            if new and not bad:
                out.next.append(dst)
                out.keeps[w].append((node, i, dst))
            if sets is not None:
                assert rep.sleepers is not None
                sets.into(node, dst, new, bad, [table[aid] for k, aid in rep.sleepers[j] if covers[k]])
                covers.append(sets.covers(dst, bad))
        if search.found is not None and stop_at_first:
            return out._replace(stopped=True, left=k + 1 < len(level) or bool(out.next))
        search.progress(node, on_node)
    return out


def _expand(workers: _Workers, blobs: list[list[bytes]], level: list[int], owner: dict[int, int],
            depth: int, keep: bool, sets: SleepSets | None = None) -> tuple[list[_Reports], dict[int, BaseException]]:
    """Every node of ``level`` expanded by the worker holding it (``blobs``: the states each
    worker adopts first; ``keep``: the workers hold the new successors): each worker's reports,
    and the error of a node whose expansion raised (its worker stopped there)."""
    jobs = len(workers.conns)
    nodes = [[n for n in level if owner[n] == w] for w in range(jobs)]
    sleeps: list[dict[int, frozenset[Action]]] = [{} for _ in range(jobs)]
    if sets is not None:
        for w in range(jobs):
            for n in nodes[w]:
                got_set = sets.take(n)
                if got_set:
                    sleeps[w][n] = got_set
    got = workers.ask([("expand", blobs[w], nodes[w], depth, keep, sleeps[w]) for w in range(jobs)])
    errors = {error.node: error.error for _, error in got if error is not None}
    return [rep for rep, _ in got], errors


def _hand_over(workers: _Workers, keeps: list[list[tuple[int, int, int]]], owner: dict[int, int],
               jobs: int) -> list[list[bytes]]:
    """Each worker keeps its new nodes' states; the fuller ones give some to the emptier ones
    (:func:`_balance`): what each worker adopts before its next expansion."""
    gives = _balance(keeps, jobs)
    sent = workers.ask([("keep", keeps[w], gives[w][1]) for w in range(jobs)])
    blobs: list[list[bytes]] = [[] for _ in range(jobs)]
    for w in range(jobs):
        for _, _, new in keeps[w]:
            owner[new] = w
        to, given = gives[w]
        if given:
            blobs[to].append(sent[w])
            for n in given:
                owner[n] = to
    return blobs


def _balance(keeps: list[list[tuple[int, int, int]]], jobs: int) -> list[tuple[int, list[int]]]:
    """Per worker: (the worker it gives states to, the new nodes it gives), so that the next
    level's nodes are spread about evenly (nothing moves when they already are). A fuller worker
    gives to one emptier worker only: even for the two processes ``default_jobs`` starts, not
    always for more."""
    counts = [len(k) for k in keeps]
    target = -(-sum(counts) // jobs)
    out: list[tuple[int, list[int]]] = [(w, []) for w in range(jobs)]
    for w in range(jobs):
        excess = counts[w] - target
        if excess <= max(4, target // 10):
            continue
        for to in range(jobs):
            room = target - counts[to]
            if room <= 0 or to == w or out[w][1]:
                continue
            n = min(room, excess)
            out[w] = (to, [new for _, _, new in keeps[w][-n:]])
            counts[w] -= n
            counts[to] += n
            break
    return out
