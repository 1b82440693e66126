"""``explore(..., reduce=True)``: one node per class of equivalent states (finished requests'
spent fields erased, ``explore.settled``; request ids, radix node ids and the tree's clock
renamed canonically, ``specstate.fuzz.symmetry``). Sound only if the model, the invariants and
the alphabet do not see the renaming, so that is checked here on the concrete search's states of
every built-in variant (its family's explore config):

- equivariance: a state renamed by a random permutation steps, under the renamed action, to the
  renamed successor, with the same violations, crash and witnesses;
- merged states behave alike: any two explored states the reduction merges have, for every
  path of two actions (renamed from one to the other), successors it merges too, with the same
  violations, crash and witnesses;
- for every built-in known bug, the reduced and the unreduced searches give the same verdict and
  the same shortest counterexample length, and the reduced one's counterexample (renamed back
  into a trace) replays to a violation (the reduced search with its sleep sets, the default).

The sleep sets (``por``, on with ``reduce``): the pairs ``search.independent`` names commute on
every explored state of every variant whose operations ``search.commuting`` accepts (the same
representative both ways, each still offered after the other, the same verdict), and a search
with them meets exactly the nodes, at the same depths, of the one without, in fewer
transitions; a wrong independence (two arrivals) is caught by that comparison."""

from __future__ import annotations

import functools
import itertools
import random

import pytest

from specstate.check import checked_step
from specstate.fuzz import explore as explore_module
from specstate.fuzz.explore import canonical, canonical_renamed, default_alphabet, explore, settled
from specstate.fuzz.search import commuting, independent
from specstate.fuzz import symmetry
from specstate.fuzz.symmetry import compact_tree, rename, rename_action
from specstate.invariants import check_outcome, outcome_witnesses
from specstate.model import Arrive, Step, get_variant, initial_state, variant_names
from specstate.model.radix import RadixTree
from specstate.model.request import FinishReason, Req, ReqStatus
from specstate.model.values import BoundedMemo, evolve
from specstate.prove._scripts import Lengths, proof_alphabet
from specstate.testing._api import explore_config


#: the variants the per-variant sweeps below run in the fast tier: the correct default of each
#: scheduler the model writes (0.5.12's v1 loop, 0.5.17's overlap loop with adaptive speculation,
#: 0.5.23) and the bugs the checks below name; every other built-in (0.5.9's default, which shares
#: 0.5.12's loop, and 0.5.17's static launch among them) runs under ``-m slow`` (the full suite,
#: ``.ci/run``), and an alias (one variant under a second name: ``sglang-0.5.17``,
#: ``seed-stale-spec-info``) is not run twice
FAST_VARIANTS = {"fixed-threshold", "naive-threshold", "switch-thrash", "upstream-adaptive", "upstream-v23"}
#: the costliest sweep (pairs three actions deep, about 5 s a variant) in the fast tier: the one
#: variant whose search meets every kind of merge (asserted below)
FAST_DEEP = {"fixed-threshold"}
#: the known bugs whose searches take seconds (the rest take a fraction of one): under ``-m slow``
SLOW_BUGS = {"unfiltered-accept-length", "v2-alloc-follows-active-steps", "v2-chain-buffers-not-rebuilt"}
#: the depth-7 and -8 searches (10-20 s each) run under ``-m slow``: the fast tier keeps the depth-5 and -6 rows
_SLOW = pytest.mark.slow


def _tiered(names: list[str], fast: set[str]) -> list:
    """``names`` without aliases, those outside ``fast`` marked ``slow``."""
    return [pytest.param(n, marks=() if n in fast else pytest.mark.slow) for n in names if get_variant(n).name == n]


def _explored(variant: str, depth: int, limit: int) -> list:
    """The distinct concrete canonical states of the unreduced search to ``depth`` that it
    expands: not those first reached by a violating step (terminal; the invariants check a step's
    changes incrementally, from a state that satisfies them)."""
    import specstate.fuzz.explore as E

    searches = []
    init = E._Search.__init__

    def keep(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        init(self, *a, **k)
        searches.append(self)

    E._Search.__init__ = keep  # type: ignore[method-assign]
    try:
        explore(explore_config(variant), variant, max_depth=depth, keep_graph=True, max_states=limit)
    finally:
        E._Search.__init__ = init  # type: ignore[method-assign]
    search = searches[0]
    return [s for s, node in search.ids.items() if not search.graph.nodes[node].get("violation")]


def _verdict(o) -> tuple:  # noqa: ANN001
    crash = (o.crash.error_class, o.crash.where, str(o.crash.shapes)) if o.crash is not None else None
    return (sorted({v.invariant for v in check_outcome(o)}), crash, frozenset(outcome_witnesses(o)), o.batch_kind)


def _inverse(p) -> list[int]:  # noqa: ANN001
    out = [0] * len(p)
    for i, j in enumerate(p):
        out[j] = i
    return out


@pytest.mark.parametrize("variant", _tiered(variant_names(), FAST_VARIANTS))
def test_a_renamed_state_steps_to_the_renamed_successor(variant: str) -> None:
    v = get_variant(variant)
    ops, alphabet, rng = v.ops(), default_alphabet(), random.Random(variant)
    cfg = v.configure(explore_config(variant))
    proof = proof_alphabet(cfg, 3, Lengths(), max_live=3)
    states = [s for s in _explored(variant, 5, 3000) if len(s.reqs) >= 2]
    assert len(states) >= 50, "the bounds should reach states with several requests"
    for s in rng.sample(states, min(120, len(states))):
        p = list(range(len(s.reqs)))
        while p == sorted(p):
            rng.shuffle(p)
        t = rename(s, p)
        for alpha in (alphabet, proof):  # the alphabets marked symmetric rename with the state
            assert sorted(map(str, alpha(t))) == sorted(str(rename_action(a, p)) for a in alpha(s))
        for a in alphabet(s):
            got, want = checked_step(t, rename_action(a, p), ops, v, 0), checked_step(s, a, ops, v, 0)
            assert _verdict(got) == _verdict(want), f"{variant}: {a} renamed by {p}"
            after = p + list(range(len(p), len(want.state.reqs)))  # an arrival keeps its id
            assert canonical(got.state) == rename(canonical(want.state), after), f"{variant}: {a} renamed by {p}"
            # the tree's ids and clock as ranks: the same future, up to that renaming
            c = checked_step(compact_tree(s), a, ops, v, 0)
            assert _verdict(c) == _verdict(want)
            assert compact_tree(canonical(c.state)) == compact_tree(canonical(want.state))


def _merged_pairs(variant: str, depth: int, limit: int) -> list:
    """``((a, a's renaming), b)`` for every explored state ``b`` (the unreduced search to
    ``depth``) that the reduction merges into the class of an earlier one, ``a``."""
    first: dict = {}
    pairs = []
    for s in _explored(variant, depth, limit):
        key, p = canonical_renamed(s, reduce=True, symmetric=True)
        if key in first:
            pairs.append((first[key], s))
        else:
            first[key] = (s, p)
    return pairs


def _representatives(variant: str, depth: int, limit: int) -> list:
    """``((s, s's renaming), representative)`` for every explored state ``s`` whose
    representative is another state: the search continues from the representative, so it must
    behave like ``s``."""
    out = []
    for s in _explored(variant, depth, limit):
        rep, p = canonical_renamed(s, reduce=True, symmetric=True)
        if rep != s:
            out.append(((s, p), rep))
    return out


def _keyed(state):  # noqa: ANN001, ANN202
    """The reduced search's key of ``state`` and the renaming of request ids it applied."""
    return canonical_renamed(state, reduce=True, symmetric=True)


def _key(s):  # noqa: ANN001, ANN202
    return _keyed(s)[0]


@functools.lru_cache(maxsize=None)
def _ops(variant: str):  # noqa: ANN202
    """The variant's operations table, built once per variant (``Variant.ops`` builds a new one)."""
    return get_variant(variant).ops()


def _same_future(variant: str, a_state, pa, b_state, pb, depth: int) -> None:  # noqa: ANN001
    """Every path of ``depth`` actions from ``a_state``, renamed into ``b_state``'s ids through
    the two renamings to the representative, meets merged states with the same verdicts.

    Each successor is keyed once: the search's key of an outcome (``canonical_renamed(state,
    reduce=True, symmetric=True)``, as ``explore`` keys it) is also the key and the renaming of the
    step-counter-erased state the path continues from (``canonical(state)``: the reduction is
    idempotent over that erasure, checked by
    ``test_keying_a_step_counter_erased_state_gives_the_same_key_and_renaming``)."""
    v = get_variant(variant)
    ops, alphabet = _ops(variant), default_alphabet()
    ident_a = pa if pa is not None else range(len(a_state.reqs))
    to_b = _inverse(pb if pb is not None else range(len(b_state.reqs)))
    a_to_b = [to_b[c] for c in ident_a]  # a's ids -> b's, through the representative's
    acts = alphabet(a_state)
    assert sorted(map(str, alphabet(b_state))) == sorted(str(rename_action(x, a_to_b)) for x in acts)
    for act in acts:
        oa = checked_step(a_state, act, ops, v, 0)
        ob = checked_step(b_state, rename_action(act, a_to_b), ops, v, 0)
        (ka, qa), (kb, qb) = _keyed(oa.state), _keyed(ob.state)
        va = _verdict(oa)
        assert (ka,) + va == (kb,) + _verdict(ob), f"{variant}: {act} from two merged states"
        if depth > 1 and not va[0]:
            _same_future(variant, canonical(oa.state), qa, canonical(ob.state), qb, depth - 1)


@pytest.mark.parametrize("variant", _tiered(variant_names(), FAST_VARIANTS))
def test_keying_a_step_counter_erased_state_gives_the_same_key_and_renaming(variant: str) -> None:
    """``canonical_renamed(canonical(s), reduce=True, symmetric=True)`` is
    ``canonical_renamed(s, reduce=True, symmetric=True)``, key and renaming, for every successor
    of every explored state (depth 4): what ``_same_future`` relies on to key each successor once."""
    v, alphabet = get_variant(variant), default_alphabet()
    ops, seen = _ops(variant), 0
    for s in _explored(variant, 4, 1500):
        for a in alphabet(s):
            after = checked_step(s, a, ops, v, 0).state
            (k1, p1), (k2, p2) = _keyed(after), _keyed(canonical(after))
            assert k1 == k2 and (None if p1 is None else list(p1)) == (None if p2 is None else list(p2)), f"{variant}: {a}"
            seen += 1
    assert seen >= 200, "the bounds should reach many successors"


def _merge_kind(pair) -> tuple[bool, bool, bool]:  # noqa: ANN001
    """What two merged states differ in among what the reduction erases: the tree's access
    times, the running batch's ``extend_lens``, the older switch decisions."""
    (a, _), b = pair
    return ([n[4] for n in a.tree.nodes] != [n[4] for n in b.tree.nodes],
            a.running.extend_lens != b.running.extend_lens, a.decisions[:-1] != b.decisions[:-1])


def _by_kind_in_turn(pairs: list) -> list:
    """The same pairs, one of each kind of merge in turn (``_merge_kind``; each kind in its
    order): a key that erases too much of one kind fails at that kind's first pairs, not after the
    hundreds of pairs that differ in nothing it erased (the tree's access order, erased, failed at
    pair 129 of 500 in explored order, 19 CPU s; 29 taken in turn). No pair is dropped."""
    groups: dict[tuple[bool, bool, bool], list] = {}
    for pair in pairs:
        groups.setdefault(_merge_kind(pair), []).append(pair)
    return [p for row in itertools.zip_longest(*groups.values()) for p in row if p is not None]


def _check_pairs(variant: str, pairs: list, depth: int) -> None:
    for (a_state, pa), b_state in _by_kind_in_turn(pairs):
        _same_future(variant, a_state, pa, b_state, canonical_renamed(b_state, reduce=True, symmetric=True)[1], depth)


@pytest.mark.parametrize("variant", _tiered(variant_names(), FAST_VARIANTS))
def test_the_reduction_merges_only_states_that_behave_alike(variant: str) -> None:
    """Pairs the reduction merges, futures of two actions compared (the second state's actions
    are the first's renamed through the two renamings to the representative)."""
    pairs = _merged_pairs(variant, 6, 6000)
    assert len(pairs) >= 20, "the bounds should reach states that the reduction merges"
    _check_pairs(variant, pairs[:40], 2)


def _ranked_tree(t: RadixTree) -> RadixTree:
    """``t`` with node ids and access times as ranks, in creation order (the tree's key before
    its nodes were named by content)."""
    ids = {v: i for i, v in enumerate(sorted({n[0] for n in t.nodes} | {t.next_id}))}
    times = {v: i for i, v in enumerate(sorted({n[4] for n in t.nodes} | {t.clock}))}
    return RadixTree(tuple([(ids[n[0]], ids.get(n[1], n[1]), n[2], n[3], times[n[4]]) for n in t.nodes]),
                     ids[t.next_id], times[t.clock], t.evictable, t.protected)


def _told_apart(a, pa, b, pb) -> set[str]:  # noqa: ANN001
    """Which of the erasures and namings added by issue 29's second round alone tell two merged
    states apart: the running decode batch's ``extend_lens``, the older switch decision, the radix
    tree's node ids in creation order (both states in the representative's request ids)."""
    out = set()
    if a.running.extend_lens != b.running.extend_lens:
        out.add("extend_lens")
    if a.decisions[:-1] != b.decisions[:-1]:
        out.add("older decision")
    ta = rename(a, pa).tree if pa is not None else a.tree
    tb = rename(b, pb).tree if pb is not None else b.tree
    if _ranked_tree(ta) != _ranked_tree(tb):
        out.add("node order")
    return out


@pytest.mark.parametrize("variant", _tiered(variant_names(), FAST_DEEP))
def test_spent_batch_fields_decisions_and_node_order_merge_only_states_that_behave_alike(variant: str) -> None:
    """The pairs that only ``explore.spent_batch``, the older decision's erasure or the tree's
    content order merge (up to 12 of each kind, 3 actions deep; fixed-threshold's search meets
    every kind); and every explored state to depth 5 against its representative, one action deep
    (the search continues from the representative: it must behave like every state it stands for)."""
    kinds: dict[str, list] = {}
    for (a, pa), b in _merged_pairs(variant, 6, 6000):
        for kind in _told_apart(a, pa, b, canonical_renamed(b, reduce=True, symmetric=True)[1]):
            kinds.setdefault(kind, []).append(((a, pa), b))
    if variant == "fixed-threshold":
        assert set(kinds) == {"extend_lens", "older decision", "node order"}, sorted(kinds)
    for pairs in kinds.values():
        _check_pairs(variant, pairs[:12], 3)
    _check_pairs(variant, _representatives(variant, 5, 3000), 1)


def test_tree_node_ids_are_names() -> None:
    """The argument for naming nodes by content: nodes with one access time lie on one path from
    the root (one tick touches one path), so two evictable leaves never tie on it and eviction
    never compares node ids; and a state whose node ids are scrambled (a random renaming,
    ``next_id`` above them all) steps like the state itself."""
    rng = random.Random(29)
    for variant in ("fixed-threshold", "finish-before-filter", "upstream-adaptive", "upstream-v23"):
        v = get_variant(variant)
        ops = v.ops()
        for s in _explored(variant, 6, 3000):
            t = s.tree
            parent = {n[0]: n[1] for n in t.nodes}
            by_time: dict[int, list[int]] = {}
            for n in t.nodes[1:]:
                by_time.setdefault(n[4], []).append(n[0])
            for same in by_time.values():
                depth = {i: _depth(parent, i) for i in same}
                chain = sorted(same, key=depth.__getitem__)
                assert all(_above(parent, x, y) for x, y in zip(chain, chain[1:])), f"{variant}: {t}"
            if len(t.nodes) < 3 or rng.random() > 0.1:
                continue
            ids = [n[0] for n in t.nodes[1:]]
            m = {0: 0, -1: -1, **dict(zip(ids, rng.sample(range(1, 4 * len(ids)), len(ids))))}
            for r in s.reqs:  # a node evicted under a waiting request's match: still a name of its own
                m.setdefault(r.last_node, 4 * len(ids) + len(m))
            tree = RadixTree(tuple(sorted((m[n[0]], m[n[1]], *n[2:]) for n in t.nodes)), 4 * len(ids) + len(m) + 1,
                             t.clock, t.evictable, t.protected)
            scrambled = evolve(s, tree=tree, reqs=tuple(r.evolve(last_node=m[r.last_node]) for r in s.reqs))
            for a in default_alphabet()(s):
                want, got = checked_step(s, a, ops, v, 0), checked_step(scrambled, a, ops, v, 0)
                assert _verdict(got) == _verdict(want), f"{variant}: {a}"
                assert _key(got.state) == _key(want.state), f"{variant}: {a}"


def _depth(parent: dict[int, int], i: int) -> int:
    d = 0
    while i > 0:
        i, d = parent[i], d + 1
    return d


def _above(parent: dict[int, int], x: int, y: int) -> bool:
    """``x`` is an ancestor of ``y``."""
    while y > 0:
        y = parent[y]
        if y == x:
            return True
    return False


def _mutant_spent_batch(b):  # noqa: ANN001, ANN202
    return b.evolve(extend_lens=None, batch_is_full=False)


def _mutant_tree(t: RadixTree) -> tuple:
    """The content naming, and every access time the same: LRU order forgotten."""
    tree, ids = symmetry._canonical_tree(t)
    return RadixTree(tuple([n[:4] + (0,) for n in tree.nodes]), tree.next_id, 0, tree.evictable, tree.protected), ids


@pytest.mark.parametrize("mutant,variant,pairs,depth", [
    ("batch_is_full erased", "fixed-threshold", _merged_pairs, 1),  # a full batch admits nothing until a row leaves
    ("every decision erased", "switch-thrash", _representatives, 1),  # stable-switch-decision compares two
    ("access order erased", "fixed-threshold", _merged_pairs, 3),  # eviction frees the least recently used leaf
])
def test_a_reduction_that_merges_too_much_is_caught(mutant: str, variant: str, pairs, depth: int,  # noqa: ANN001
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above fail for a key that erases one thing more than the argument allows:
    ``batch_is_full`` beside the spent ``extend_lens``, both switch decisions (the search, which
    continues from representatives, never again sees two), or the tree's access order."""
    if mutant == "batch_is_full erased":
        monkeypatch.setattr(explore_module, "spent_batch", _mutant_spent_batch)
    elif mutant == "every decision erased":
        monkeypatch.setattr(explore_module, "kept_decisions", lambda ds: ())
    else:
        monkeypatch.setattr(symmetry, "_TREES", BoundedMemo(_mutant_tree, 1024))
    with pytest.raises(AssertionError):
        _check_pairs(variant, pairs(variant, 6, 6000)[:500], depth)


def _known_bugs() -> list[str]:
    out = []
    for name in variant_names():
        v = get_variant(name)
        if v.expected_invariant and not v.correct and v.name == name:
            out.append(name)
    return out


@pytest.mark.parametrize("variant", _tiered(_known_bugs(), set(_known_bugs()) - SLOW_BUGS))
def test_reduced_and_unreduced_searches_agree_on_every_known_bug(variant: str) -> None:
    """The same verdict and the same shortest counterexample length, where both searches are
    exhaustive (depth 8, or depth 6 where no counterexample is that short)."""
    cfg = explore_config(variant)
    for depth in (8, 6):
        full = explore(cfg, variant, max_depth=depth, keep_graph=False, stop_at_first=True, max_states=40_000)
        if full.counterexample is not None or depth == 6:
            break
    red = explore(cfg, variant, max_depth=depth, keep_graph=False, stop_at_first=True, reduce=True,
                  max_states=40_000)
    assert full.counterexample is not None or full.complete, "the unreduced search should be exhaustive"
    assert (full.counterexample is None) == (red.counterexample is None), variant
    if full.counterexample is not None:
        assert len(red.counterexample) == len(full.counterexample), variant  # type: ignore[arg-type]
        assert red.violations, "the reduced counterexample, renamed back, replays to a violation"
    else:
        assert red.complete and red.states < full.states


@pytest.mark.parametrize("variant,depth", [pytest.param("naive-threshold", 8, marks=_SLOW),  # the largest
                                           pytest.param("fixed-threshold", 7, marks=_SLOW),
                                           pytest.param("stale-graph-padding", 7, marks=_SLOW),
                                           ("upstream-adaptive", 6), ("v2-single-reserve", 6)])
def test_the_reduced_search_finds_what_the_concrete_one_finds_in_fewer_states(variant: str, depth: int) -> None:
    cfg = explore_config(variant)
    full = explore(cfg, variant, max_depth=depth, keep_graph=False)
    red = explore(cfg, variant, max_depth=depth, keep_graph=False, reduce=True)
    par = explore(cfg, variant, max_depth=depth, keep_graph=False, reduce=True, jobs=2)
    assert full.complete and red.complete
    assert red.states < full.states
    assert red.witnesses == full.witnesses
    assert (full.counterexample is None) == (red.counterexample is None)
    if full.counterexample is not None:
        assert len(red.counterexample) == len(full.counterexample)  # type: ignore[arg-type]
        assert red.violations
    assert (par.states, par.transitions, par.counterexample) == (red.states, red.transitions, red.counterexample)


def test_an_alphabet_that_names_ids_is_not_renamed() -> None:
    """``fixed_alphabet`` names ids (``prefix_of``): ``reduce`` then keeps ids (settled fields and
    the tree's ranks only), and ``canonical`` renames nothing without ``symmetric``."""
    from specstate.fuzz.explore import fixed_alphabet, is_symmetric

    assert is_symmetric(default_alphabet()) and not is_symmetric(fixed_alphabet([Arrive(4, 3, 0, 2)]))
    assert is_symmetric(proof_alphabet(explore_config("fixed-threshold"), 2, Lengths(), max_live=2))
    s = _explored("fixed-threshold", 4, 2000)
    moved = [x for x in s if canonical_renamed(x, reduce=True, symmetric=True)[1] is not None]
    assert moved, "some explored states are renamed by the symmetric reduction"
    assert all(canonical_renamed(x, reduce=True)[1] is None for x in moved)
    assert all([r.rid for r in canonical(x, reduce=True).reqs] == [r.rid for r in x.reqs] for x in moved)


def test_settled_keeps_identity_prompt_and_tokens_only() -> None:
    r = Req(rid=3, prompt_len=5, max_new_tokens=9, output_len=4, status=ReqStatus.FINISHED, kv_committed_len=8,
            finish_reason=FinishReason.EOS, segments=((5, 1), (9, 3)), last_node=2, retractions=1)
    s = settled(r)
    assert (s.rid, s.prompt_len, s.status, s.segments) == (3, 5, ReqStatus.FINISHED, ((5, 1), (9, 3)))
    assert (s.output_len, s.kv_committed_len, s.finish_reason, s.last_node, s.retractions) == (0, 0, None, 0, 0)
    # a live request is never reduced
    live = initial_state(explore_config("fixed-threshold"))
    assert canonical(live, reduce=True, symmetric=True) == canonical(live)
    assert Step() in default_alphabet()(live) and Arrive(4, 3) in default_alphabet()(live)


def test_a_finished_row_keeps_its_remaining_tokens_until_filtered() -> None:
    """Admission reserves ``max_new_tokens - output_len`` for every row of the running batch,
    finished or not (``admission._start``): states that differ there are not merged (they were,
    before ``settled_row``: the next step admitted two requests from one and one from the other),
    and states that differ only in how those tokens split between the two fields are."""
    s = next(x for x in _explored("fixed-threshold", 6, 6000)
             if any(x.req(r).done and not x.req(r).kv_allocated_len for r in x.running.rids))
    r = next(s.req(i) for i in s.running.rids if s.req(i).done)
    more = evolve(s, reqs=tuple(x.evolve(max_new_tokens=x.max_new_tokens + 3) if x is r else x for x in s.reqs))
    split = evolve(s, reqs=tuple(x.evolve(max_new_tokens=x.max_new_tokens + 1, output_len=x.output_len + 1)
                                 if x is r else x for x in s.reqs))
    assert _key(more) != _key(s) and _key(split) == _key(s)


def _search_of(variant: str, depth: int, **kw) -> tuple:  # noqa: ANN003
    """The serial search's result and its bookkeeping (``_Search``: its nodes, their depths)."""
    searches = []
    init = explore_module._Search.__init__

    def keep(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        init(self, *a, **k)
        searches.append(self)

    explore_module._Search.__init__ = keep  # type: ignore[method-assign]
    try:
        res = explore(explore_config(variant), variant, max_depth=depth, keep_graph=False, reduce=True, **kw)
    finally:
        explore_module._Search.__init__ = init  # type: ignore[method-assign]
    return res, searches[0]


def _nodes(search) -> dict:  # noqa: ANN001
    return {state: search.depth[node] for state, node in search.ids.items()}


@pytest.mark.parametrize("variant", _tiered([n for n in variant_names() if commuting(get_variant(n).ops(), default_alphabet())],
                                             FAST_VARIANTS))
def test_independent_actions_commute_on_every_explored_state(variant: str) -> None:
    v = get_variant(variant)
    ops, alphabet = v.ops(), default_alphabet()
    pairs = 0
    for s in _explored(variant, 5, 3000):
        acts = alphabet(s)
        for i, a in enumerate(acts):
            for b in acts[i + 1:]:
                if not independent(a, b):
                    continue
                assert independent(b, a)
                oa, ob = checked_step(s, a, ops, v, 0), checked_step(s, b, ops, v, 0)
                if check_outcome(oa) or check_outcome(ob):
                    continue
                sa, sb = canonical(oa.state), canonical(ob.state)
                assert b in alphabet(sa) and a in alphabet(sb), f"{variant}: {a} and {b} stay offered after each other"
                ab, ba = checked_step(sa, b, ops, v, 1), checked_step(sb, a, ops, v, 1)
                key = canonical(ab.state, reduce=True, symmetric=True)
                assert key == canonical(ba.state, reduce=True, symmetric=True), f"{variant}: {a} then {b}"
                assert _verdict(ab) == _verdict(ba), f"{variant}: {a} then {b}"
                pairs += 1
    assert pairs >= 100, "the bounds should reach many independent pairs"


@pytest.mark.parametrize("variant,depth", [pytest.param("fixed-threshold", 7, marks=_SLOW),
                                           pytest.param("naive-threshold", 7, marks=_SLOW), ("switch-thrash", 6),
                                           ("upstream-adaptive", 6), ("v2-single-reserve", 5),
                                           ("v2-skip-zero-step-draft-extend", 6)])
def test_sleep_sets_meet_every_node_at_its_depth_in_fewer_transitions(variant: str, depth: int) -> None:
    assert commuting(get_variant(variant).ops(), default_alphabet())
    plain, plain_search = _search_of(variant, depth, por=False)
    por, por_search = _search_of(variant, depth, por=True)
    assert _nodes(por_search) == _nodes(plain_search), f"{variant}: the same nodes at the same depths"
    assert (por.states, por.complete, por.witnesses) == (plain.states, plain.complete, plain.witnesses)
    assert (por.counterexample is None) == (plain.counterexample is None)
    if plain.counterexample is not None:
        assert len(por.counterexample) == len(plain.counterexample) and por.violations  # type: ignore[arg-type]
    assert por.transitions < plain.transitions
    par = explore(explore_config(variant), variant, max_depth=depth, keep_graph=False, reduce=True, jobs=2)
    assert (par.states, par.transitions, par.counterexample) == (por.states, por.transitions, por.counterexample)


def test_a_wrong_independence_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two arrivals do not commute (FCFS queue order, ids by arrival): declaring them independent
    loses nodes, which the comparison above sees."""
    plain, plain_search = _search_of("fixed-threshold", 6, por=False)

    def wrong(a, b) -> bool:  # noqa: ANN001
        return independent(a, b) or (isinstance(a, Arrive) and isinstance(b, Arrive))

    monkeypatch.setattr(explore_module, "independent", wrong)
    bad, bad_search = _search_of("fixed-threshold", 6, por=True)
    assert _nodes(bad_search) != _nodes(plain_search)
