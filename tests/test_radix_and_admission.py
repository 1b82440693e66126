"""The scheduler under memory pressure, on hand-made cases: the radix tree's counts, prefix
hits shortening the prefill, admission budgets, ``new_token_ratio``, retraction order."""

from __future__ import annotations

import random  # noqa: F401  (type of the test helper)

from specstate.check import Run
from specstate.model import Arrive, SpecConfig, Step
from specstate.model.radix import EMPTY_TREE, dec_lock_ref, evict, inc_lock_ref, insert, match_prefix


def _key(*owners_and_lens: tuple[str, int]) -> tuple:
    out: list = []
    for owner, n in owners_and_lens:
        out.extend((owner, i) for i in range(len(out), len(out) + n))
    return tuple(out)


def test_insert_splits_a_shared_prefix_and_counts_slots() -> None:
    a = _key(("g", 10), ("a", 5))
    b = _key(("g", 10), ("b", 3))
    t, present = insert(EMPTY_TREE, a)
    assert present == 0 and t.evictable == 15 and t.protected == 0
    t, present = insert(t, b)
    assert present == 10 and t.evictable == 18  # only b's own 3 are new
    assert sorted(len(n[2]) for n in t.nodes) == [0, 3, 5, 10]  # root, two leaves, the split node
    t, matched, node = match_prefix(t, _key(("g", 10), ("c", 4)))
    assert matched == 10 and len(next(n for n in t.nodes if n[0] == node)[2]) == 10


def test_locks_move_slots_between_evictable_and_protected_and_block_eviction() -> None:
    t, _ = insert(EMPTY_TREE, _key(("a", 8)))
    t, _ = insert(t, _key(("b", 4)))
    t, _, node_a = match_prefix(t, _key(("a", 8)))
    t = inc_lock_ref(t, node_a)
    assert (t.evictable, t.protected) == (4, 8)
    t2, freed = evict(t, 100)
    assert freed == 4 and t2.evictable == 0 and t2.protected == 8  # the locked path stays
    t = dec_lock_ref(t, node_a)
    assert (t.evictable, t.protected) == (12, 0)


def test_eviction_is_least_recently_used_first_whole_leaves() -> None:
    t, _ = insert(EMPTY_TREE, _key(("old", 6)))
    t, _ = insert(t, _key(("new", 9)))
    t, freed = evict(t, 1)
    assert freed == 6  # the older leaf, all of it
    t, _, _ = match_prefix(t, _key(("new", 9)))
    t, freed = evict(t, 1)
    assert freed == 9 and t.total == 0


def _run(**cfg: object) -> Run:
    return Run(SpecConfig().with_(**cfg), "fixed-threshold")


def test_a_shared_prompt_prefix_is_not_prefilled_again() -> None:
    run = _run()
    run.apply(Arrive(30, 4))
    run.apply(Step())  # prefill of request 0: its prompt goes into the tree
    run.apply(Arrive(25, 4, prefix_of=0, shared_len=20))
    o = run.apply(Step())
    assert o.batch_kind == "prefill" and o.batch_rids == (1,)
    # 20 shared tokens are 19 bigram keys: KV of tokens 0..18 is reused
    assert o.state.last_batch.extend_lens == (25 - 19,)
    # after the prefill its own prompt is cached too: 24 keys, 19 of them shared
    assert o.state.req(1).cache_protected_len == 24
    assert o.state.tree.total == 29 + 24 - 19


def test_new_token_ratio_decays_per_decode_step_and_resets_when_idle() -> None:
    run = _run()
    cfg = run.config
    run.apply(Arrive(8, 5))
    run.apply(Step())
    ratios = [run.apply(Step(accept=(1,))).state.new_token_ratio for _ in range(3)]
    assert ratios[0] == max(cfg.init_new_token_ratio - cfg.new_token_ratio_decay, cfg.min_new_token_ratio)
    assert ratios[1] < ratios[0] and ratios[2] < ratios[1]
    while run.state.live_reqs():
        run.apply(Step(accept=(1,)))
    assert run.apply(Step()).state.new_token_ratio == cfg.init_new_token_ratio


def test_retraction_takes_from_the_back_and_requeues_at_the_back() -> None:
    # a tiny pool: three requests admitted on the ratio's estimate cannot all keep decoding
    run = _run(target_kv_pool_size=160, draft_kv_pool_size=160, disable_batch_threshold=None)
    for _ in range(3):
        run.apply(Arrive(10, 60))
    run.apply(Arrive(6, 4))
    retracted: list[int] = []
    for _ in range(200):
        o = run.apply(Step(accept=(4, 4, 4)))
        rids = [e.rid for e in o.events if e.kind == "retract"]
        if rids:
            before = o.before.running.rids
            assert rids == list(before[len(before) - len(rids):][::-1])  # from the back
            assert o.state.waiting[-len(rids):] == tuple(rids)  # appended, in retraction order
            assert o.state.new_token_ratio <= 1.0
            retracted += rids
        if not run.state.live_reqs():
            break
    assert retracted, "the pool was meant to be too small"
    assert run.result().ok, run.result().first.describe()  # type: ignore[union-attr]


def _random_keys(rng: "random.Random", n: int) -> list[tuple]:
    """Keys that share prefixes of random lengths (so inserts split nodes and matches end inside them)."""
    keys: list[tuple] = []
    for i in range(n):
        base = keys[rng.randrange(len(keys))] if keys and rng.random() < 0.7 else ()
        keep = rng.randint(0, len(base))
        keys.append(base[:keep] + tuple((f"r{i}", j) for j in range(keep, keep + rng.randint(0, 12))))
    return keys


def test_one_copy_cache_operations_equal_their_steps_one_by_one() -> None:
    """``cache_unfinished`` / ``cache_finished`` (one tree copy) give the tree, counts and nodes
    of ``insert``, ``match_prefix``, ``dec_lock_ref``, ``inc_lock_ref`` called one by one,
    over trees grown by random shared-prefix keys (node ids, locks and access times included)."""
    import random

    from specstate.model.radix import ROOT, cache_finished, cache_unfinished

    for seed in range(40):
        rng = random.Random(seed)
        t, locked = EMPTY_TREE, [ROOT]
        for key in _random_keys(rng, 12):
            old = rng.choice(locked)
            # RadixCache.cache_unfinished_req, step by step
            u, present = insert(t, key)
            u, matched, node = match_prefix(u, key)
            u = inc_lock_ref(dec_lock_ref(u, old), node)
            assert cache_unfinished(t, key, old) == (u, present, matched, node)
            # RadixCache.cache_finished_req (insert or not), then unlock
            fin = rng.choice((key, None))
            f, fpresent = insert(t, fin) if fin is not None else (t, 0)
            assert cache_finished(t, fin, old) == (dec_lock_ref(f, old), fpresent)
            t = u
            locked.append(node)
            if rng.random() < 0.3:
                t, _ = evict(t, rng.randint(1, 20))
                locked = [ROOT]


def test_common_prefix_length() -> None:
    from specstate.model.radix import _common

    a = tuple(range(50))
    for n in range(51):
        b = a[:n] + ("x",) * 5
        assert _common(a, b) == n and _common(a, ("pad",) * 3 + b, 3) == n
    assert _common((), (1, 2)) == 0 and _common((1, 2), ()) == 0
