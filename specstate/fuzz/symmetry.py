"""Symmetry reduction for ``explore``: one node per class of states equal up to a renaming of
request ids and of the radix tree's node ids and logical clock.

Owns no state. :func:`relabel` maps a canonical state (``explore.canonical``) to the
representative of its class and says which renaming it applied; :func:`concrete_path` turns a
path of the reduced search (actions on representatives) back into a trace that replays from
``initial_state``.

Why it is sound. A renaming ``p`` of request ids (a permutation of ``0..n-1`` for ``n``
requests ever seen) applied to a state renames every field that holds an id: ``Req.rid``, the
owners in ``Req.segments`` and in the radix tree's bigram keys (a token is ``(owner, ...)``,
``prefix_cache``), the waiting queue, every batch's ``rids``, ``req_pool_indices`` (the model
keeps rids there), ``chunked_rid`` and ``spec_info.rows``, the state's ``chunked_rid``, the
decisions' ``rids``, and the v2 family's pending and launched results (their batch, their
``eos``) and ``chunked_abort``; graph-buffer writers are already erased by the canonical key
(``GraphBuffers.canonical``). Queues and batches keep their order: order is carried by
positions, never by id values. The model treats ids as names only: it indexes ``reqs`` by them,
compares them for equality and gives an arrival the next free one (``len(reqs)``, which every
renaming of ``0..n-1`` fixes); nothing orders, adds or compares them by size (``step``'s
bookkeeping sorts changed ids, ``changed_since``, which only selects what to check). So ``step``
is equivariant, ``step(p(s), p(a)) == p(step(s, a))`` (``p(a)``: the action with its ids
renamed), and so are the invariants' verdicts (they name ids in their reports only) and the
witnesses. The default alphabet is equivariant too: arrivals name no id, the steps' accept
lengths are per row, EOS goes to the first running row, and an abort to every live request (a
set, whatever its order). So two states one renaming apart have renamed futures: the same
verdicts, witnesses and lengths of every path; breadth-first search over the classes finds a
violation at the same depth as over the states, and ``complete`` is the same.

The radix tree's access times are compared only by order (eviction pops the least recently
used evictable leaf, ``radix.evict``) and by equality; a new access takes ``clock + 1``, above
every value present, so they become their ranks. Its node ids are compared by equality (parents,
a request's ``last_node``) and by order only to break a tie between two evictable leaves with one
access time, which never happens: one clock tick touches one path from the root (a match or an
insert refreshes the path it walks; the nodes it splits or adds lie on it), so the nodes sharing an
access time lie on one path, and at most one of them is a leaf at a time (the others are its
ancestors). So node ids are names, and a new node takes ``next_id``, above every id in use:
:func:`compact_tree` numbers the nodes depth first from the root, children by their key's first
element (the tree's contents, not the order its nodes were made in), then any id a request still
names whose node was evicted, then ``next_id``. It is a renaming of the same kind.

The representative: ids in order of first appearance in the running batch's rows, the last
prefill batch, the chunked request, the waiting queue, the v2 results, the decisions; then the
other (finished) requests sorted by where their tokens sit in the (compacted) tree and by their
fields, ties by old id. Whether two equivalent states always meet the same representative only
decides how much is merged, never soundness: any renaming yields an equivalent state.

Where it does not hold: an alphabet that names ids (``fixed_alphabet``'s arrivals with
``prefix_of``) is not equivariant, so ``explore`` applies this only to alphabets marked
``symmetric`` (``default_alphabet``'s); a variant's own operation handed ids (a batch, a request,
the state: ``specstate.fuzz.reads``) may compare them by size, so ``explore`` renames no ids for
it, and keeps the tree's node ids and clock where one is handed the state or a request.
``tests/test_explore_reduce.py`` checks equivariance on the explored states of every built-in
variant, that merged states have the same futures, and that reduced and unreduced searches
agree on every built-in known bug.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, Sequence, cast

from specstate.model import Abort, Action, Arrive, ModelState, Step
from specstate.model.batch import ScheduleBatch
from specstate.model.radix import ROOT, RadixTree
from specstate.model.request import Req
from specstate.model.state import Decision
from specstate.model.values import BoundedMemo, evolve

__all__ = ["relabel", "rename", "rename_action", "compact_tree", "concrete_path"]

Perm = Sequence[int]  #: old id -> new id
_Bigrams = tuple[tuple[int, int, int], ...]  #: a radix key's elements: (owner, next owner, position) (``prefix_cache.bigram_key``)

#: one object per distinct relabelled request, recently made (a serial search keeps every state it
#: has seen; a parallel one's workers hold them pickled, where a memo of many would only cost)
_REQS: BoundedMemo[Req, Req] = BoundedMemo(lambda r: r, 4096)


def relabel(state: ModelState, *, tree: bool = True) -> tuple[ModelState, Perm | None]:
    """The representative of ``state``'s class (see the module doc) and the request renaming
    applied (``None``: none). ``tree=False``: the radix tree's node ids and clock are kept as they
    are (a variant's own operation can read them, ``specstate.fuzz.reads``); only request ids are
    renamed (in the tree's keys too)."""
    if tree:
        state = compact_tree(state)
    p = _order(state)
    if all(i == j for i, j in enumerate(p)):
        return state, None
    renamed = rename(state, p)
    return (compact_tree(renamed) if tree else renamed), p  # the tree's order follows its keys' (renamed) owners


# -- the radix tree's ids and clock -----------------------------------------------------

def compact_tree(state: ModelState) -> ModelState:
    """The radix tree's node ids in a canonical order (:func:`_canonical_tree`; the requests'
    ``last_node`` renamed with them, a node id no node holds any more numbered after the nodes,
    ``next_id`` after all) and its access times (with ``clock``) replaced by their ranks; the
    state itself when they already are."""
    t = state.tree
    tree, ids = _TREES(t)
    reqs = state.reqs
    if any([r.last_node not in ids for r in reqs]):  # a node evicted under an unlocked match
        ids = dict(ids)
        for r in reqs:
            ids.setdefault(r.last_node, len(ids))
        tree = RadixTree(tree.nodes, len(ids), tree.clock, tree.evictable, tree.protected, tree.page_size)
    if tree == t:
        return state
    reqs = tuple([r if ids[r.last_node] == r.last_node else _REQS(r.evolve(last_node=ids[r.last_node]))
                  for r in reqs])
    return evolve(state, tree=tree, reqs=reqs)


def _canonical_tree(t: RadixTree) -> tuple[RadixTree, dict[int, int]]:
    """``t`` with its access times as ranks and its node ids in depth-first order from the root,
    children by their key's first element (a node is the one child of its parent that starts with
    that element, so the order follows the tree's contents, not the order nodes were made in);
    and the renaming of node ids."""
    times = sorted({n[4] for n in t.nodes} | {t.clock})
    tmap = {v: i for i, v in enumerate(times)}
    kids: dict[int, list[tuple[Hashable, int]]] = {}
    page = t.page_size  # paged: a child is the one that starts with that page (RadixKey.child_key)
    for n in t.nodes:
        if n[1] >= 0:
            kids.setdefault(n[1], []).append((n[2][0] if page == 1 else n[2][:page], n[0]))
    ids: dict[int, int] = {}
    todo = [ROOT]
    while todo:
        i = todo.pop()
        ids[i] = len(ids)
        below = kids.get(i)
        if below:
            below.sort(reverse=True)
            todo.extend([c for _, c in below])
    nodes = sorted([(ids[n[0]], ids[n[1]] if n[1] >= 0 else n[1], n[2], n[3], tmap[n[4]]) for n in t.nodes])
    return RadixTree(tuple(nodes), len(ids), tmap[t.clock], t.evictable, t.protected, t.page_size), ids


#: a tree -> its canonical form and renaming (``_canonical_tree``); trees repeat across states
_TREES: BoundedMemo[RadixTree, tuple[RadixTree, dict[int, int]]] = BoundedMemo(_canonical_tree, 65_536)


# -- request ids --------------------------------------------------------------------------

def _order(s: ModelState) -> list[int]:
    """old id -> new id: first appearance in the state's ordered structures, then the rest by
    their tree position and fields (module doc)."""
    seen: dict[int, None] = {}
    add = seen.setdefault
    for r in s.running.rids:
        add(r)
    if s.last_batch is not None:
        for r in s.last_batch.rids:
            add(r)
    if s.chunked_rid is not None:
        add(s.chunked_rid)
    for r in s.waiting:
        add(r)
    for r in s.overlap.named_rids():
        add(r)
    for d in s.decisions:
        for r in d.rids:
            add(r)
    n = len(s.reqs)
    if len(seen) < n:
        rest = [r for r in range(n) if r not in seen]
        if len(rest) > 1:
            rest.sort(key=_rest_key(s, seen))
        for r in rest:
            add(r)
    p = [0] * n
    for new, old in enumerate(seen):
        p[old] = new
    return p


def _rest_key(s: ModelState, labelled: dict[int, None]) -> Callable[[int], tuple]:
    """A sort key for requests not placed by the state's structures, from what a renaming keeps:
    the latest access time of a tree node holding one of their tokens (a node's ancestors were
    accessed no earlier, so that is the access of their topmost node), then their fields with ids
    replaced by "itself" / "placed, at this rank" / "another unplaced one"."""
    where: dict[int, int] = {}
    for node in s.tree.nodes:
        t = -node[4]
        for tok in node[2]:
            for owner in tok[:2]:
                if t < where.get(owner, 1 << 62):
                    where[owner] = t
    rank = {r: i for i, r in enumerate(labelled)}

    def key(rid: int) -> tuple:
        r = s.reqs[rid]
        segs = tuple((end, -1 if o == rid else rank.get(o, -2)) for end, o in r.segments)
        return (where.get(rid, 1 << 62), r.prompt_len, r.max_new_tokens, r.output_len, r.status.value,
                r.kv_committed_len, r.kv_allocated_len, r.draft_kv_len, r.to_abort, r.eos_pending,
                r.finish_reason.value if r.finish_reason is not None else "", r.prefix_len, r.cache_protected_len,
                r.last_node, r.is_retracted, r.retractions, segs, rid)

    return key


def rename(s: ModelState, p: Perm) -> ModelState:
    """``s`` with every request id ``i`` renamed ``p[i]`` (the fields the module doc lists)."""
    reqs: list[Req | None] = [None] * len(s.reqs)
    for r in s.reqs:
        new = p[r.rid]
        reqs[new] = _REQS(r.evolve(rid=new, segments=tuple([(end, p[o]) for end, o in r.segments])))
    v2 = s.v2
    if v2 is not None:
        v2 = evolve(v2, pending=_result(v2.pending, p), launched=_result(v2.launched, p),
                       chunked_abort=None if v2.chunked_abort is None else p[v2.chunked_abort])
    return evolve(s, reqs=tuple(reqs), waiting=tuple([p[r] for r in s.waiting]), running=_batch(s.running, p),
                  last_batch=None if s.last_batch is None else _batch(s.last_batch, p),
                  chunked_rid=None if s.chunked_rid is None else p[s.chunked_rid],
                  decisions=tuple([_decision(d, p) for d in s.decisions]), tree=_tree(s.tree, p), v2=v2,
                  reqs_delta=None)


def _batch(b: ScheduleBatch, p: Perm) -> ScheduleBatch:
    if not b.rids and b.chunked_rid is None and not b.req_pool_indices:
        return b
    info = b.spec_info
    if info is not None and getattr(info, "rows", None) is not None:
        info = evolve(info, rows=tuple([p[r] for r in info.rows]))
    return b.evolve(rids=tuple([p[r] for r in b.rids]), req_pool_indices=tuple([p[r] for r in b.req_pool_indices]),
                    chunked_rid=None if b.chunked_rid is None else p[b.chunked_rid], spec_info=info,
                    input_ids_from=_provenance(b.input_ids_from, p), out_cache_loc_from=_provenance(b.out_cache_loc_from, p))


def _provenance(prov, p: Perm):  # noqa: ANN001, ANN202 - a batch.Provenance or None (no part of equality)
    """The requests a provenance names, renamed (its steps stay the run's own)."""
    return None if prov is None else evolve(prov, rids=tuple([p[r] for r in prov.rids]))


def _result(res, p: Perm):  # noqa: ANN001, ANN202 - a v2 PendingResult or None
    if res is None:
        return None
    return evolve(res, batch=_batch(res.batch, p), eos=tuple([p[r] for r in res.eos]))


def _decision(d: Decision, p: Perm) -> Decision:
    return evolve(d, rids=tuple([p[r] for r in d.rids]))


def _tree(t: RadixTree, p: Perm) -> RadixTree:
    if len(t.nodes) == 1:
        return t
    # a key's elements are bigrams (typed Hashable in the tree)
    nodes = tuple([(n[0], n[1], tuple([(p[a], p[b], *rest) for a, b, *rest in cast(_Bigrams, n[2])]), n[3], n[4])
                   for n in t.nodes])
    return RadixTree(nodes, t.next_id, t.clock, t.evictable, t.protected, t.page_size)


# -- actions and paths --------------------------------------------------------------------

def rename_action(a: Action, p: Perm) -> Action:
    """``a`` with its request ids renamed (``p[i]`` for id ``i``; ids past ``p`` unchanged)."""
    def f(r: int) -> int:
        return p[r] if r < len(p) else r

    if isinstance(a, Abort):
        return Abort(f(a.rid))
    if isinstance(a, Step):
        return Step(accept=a.accept, eos=tuple([f(r) for r in a.eos])) if a.eos else a
    if a.prefix_of is not None:
        return Arrive(a.prompt_len, a.max_new_tokens, f(a.prefix_of), a.shared_len)
    return a


def concrete_path(start: ModelState, path: Iterable[Action], successor: Callable[[ModelState, Action, int], ModelState],
                  canon: Callable[[ModelState], tuple[ModelState, Perm | None]]) -> list[Action]:
    """The trace from ``start`` that a path of the reduced search stands for: the search applied
    each action to a representative, so the path is replayed on representatives (``successor``:
    the raw next state at that depth, ``canon``: its representative and renaming) while the
    renaming from the trace's ids to the representative's (``to_canon``) is composed, and each
    action is renamed back through its inverse."""
    out: list[Action] = []
    rep, to_canon = start, list(range(len(start.reqs)))
    for depth, a in enumerate(path):
        back = [0] * len(to_canon)
        for concrete, c in enumerate(to_canon):
            back[c] = concrete
        out.append(rename_action(a, back))
        rep, p = canon(successor(rep, a, depth))
        to_canon += range(len(to_canon), len(rep.reqs))  # an arrival keeps its id on both sides
        if p is not None:
            to_canon = [p[c] for c in to_canon]
    return out
