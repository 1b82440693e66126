"""What the exploration's key erases is derived from what the operations in use can read
(``specstate.fuzz.reads``, issue 36 item 3).

- every built-in variant keeps every erasure (so their reduced searches are as before), and
  the built-in correct variants' reduced and unreduced searches agree (the known bugs are
  ``test_explore_reduce.py``'s);
- a user's operation keeps exactly the erasures its arguments reach (the slot's signature);
- the adversarial user variants of ``tests/user_variants/reads_erased.py`` (each reads one erased
  field: the older decision, the decode batch's ``extend_lens``, a settled request, request ids
  by value, the tree's clock, the step counter) get the same verdict and counterexample length
  reduced and unreduced, the counterexample replays, and the unreduced search is the truth: the
  erasing search (every erasure forced) gets it wrong for each;
- ``explore`` says on stderr what it kept, and the shrinker's breadth-first check keeps it too.
"""

from __future__ import annotations


import pytest

from specstate.check import run_actions
from specstate.fuzz import explore as explore_module
from specstate.fuzz.explore import default_alphabet, explore, shortest_violation
from specstate.fuzz.reads import ERASURE_NAMES, kept, reach, reduction_notes
from specstate.fuzz.search import commuting
from specstate.model import get_variant, load_variant, variant_names
from specstate.model.ops import OP_NAMES
from specstate.testing._api import explore_config

USER = "tests.user_variants.reads_erased"
EVERYTHING = frozenset(ERASURE_NAMES)


def test_every_built_in_variant_keeps_every_erasure() -> None:
    for name in variant_names():
        assert kept(get_variant(name).ops()) == {}, name


def test_a_slot_reaches_what_its_arguments_hold() -> None:
    assert reach("decide_speculation") == EVERYTHING  # handed tx: the whole state
    assert reach("merge_batch") == {"extend-lens", "ids"}  # two batches
    assert reach("new_draft_input") == {"ids"}  # the config and the rows
    assert reach("validate_input_length") == {"settled", "retractions", "tree", "ids"}  # a request
    assert reach("graph_runners") == frozenset()  # the config only
    assert "step-counters" in reach("replay_prepare")  # its ``iteration`` is the step counter
    assert all(reach(op) <= EVERYTHING for op in OP_NAMES)


def test_every_type_a_slot_is_handed_is_classified() -> None:
    """A type not in ``reads._KINDS`` counts as the whole state (sound); a new operation handed a
    new type shows here, so its reach is decided, not defaulted."""
    import inspect
    import re

    from specstate.fuzz.reads import _KINDS
    from specstate.model.ops import DEFAULT_OPS

    for op in OP_NAMES:
        for p in list(inspect.signature(getattr(DEFAULT_OPS, op)).parameters.values())[1:]:
            names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", str(p.annotation).replace("'", "")))
            assert names <= set(_KINDS), (op, p.name, names - set(_KINDS))


def test_a_user_operation_keeps_what_it_reaches() -> None:
    small = load_variant("tests.user_variants.mine:SmallThreshold")
    assert set(kept(small.ops())) == EVERYTHING
    assert kept(small.ops())["decisions"] == ("decide_speculation",)
    sub = load_variant("tests.user_variants.mine:SubclassedDraftInput")
    assert kept(sub.ops()) == {"ids": ("new_draft_input",)}
    assert reduction_notes(kept(sub.ops())) == ["reduction: kept request ids (symmetry) (variant overrides new_draft_input)"]
    assert reduction_notes(kept(sub.ops()), reduce=False) == []  # --no-reduce renames no ids anyway
    assert reduction_notes({}) == []


def test_an_invariant_of_your_own_keeps_everything() -> None:
    got = kept(get_variant("fixed-threshold").ops(), invariants=["mine"])
    assert set(got) == EVERYTHING and got["decisions"] == ("invariant mine",)


def test_a_user_arrival_check_turns_the_sleep_sets_off() -> None:
    fixed = get_variant("fixed-threshold").ops()
    assert commuting(fixed, default_alphabet())
    assert not commuting(fixed.replace(validate_input_length=lambda ops, cfg, req: req), default_alphabet())


@pytest.mark.parametrize("variant", [n for n in variant_names()
                                     if get_variant(n).correct and get_variant(n).name == n])
def test_reduced_and_unreduced_agree_on_every_correct_built_in(variant: str) -> None:
    cfg = explore_config(variant)
    depth = 5 if get_variant(variant).family_name != "sglang-0.5.12" else 6
    full = explore(cfg, variant, max_depth=depth, keep_graph=False)
    red = explore(cfg, variant, max_depth=depth, keep_graph=False, reduce=True)
    assert full.complete and red.complete and red.states < full.states
    assert (full.counterexample, red.counterexample) == (None, None)
    assert red.witnesses == full.witnesses and red.kept == {}


#: (variant, depth, alphabet's max_live / max_arrivals, threshold or None: the explore config's)
#: -> the true verdict: the counterexample length (None: no violation), which a search that
#: erases everything gets wrong
CASES = {
    # 9 actions on the explore config (issue 36); 8 with threshold 1 and two requests
    "OlderDecision": (8, (2, 2), 1, 8),
    "PrefillLeftovers": (7, (3, 4), None, None),  # the erasing search reports 7, which does not replay
    "AfterAbort": (7, (3, 4), None, 7),
    "OldestFirst": (7, (3, 4), None, 7),
    "BusyTree": (7, (3, 4), None, 5),
    "EveryFifthStep": (7, (3, 4), None, 5),  # the step counter: the unreduced key erased it too
}


#: the cases, the costliest (``PrefillLeftovers``: 7 CPU s, its two searches the largest) under ``-m slow``
_TIERED = [pytest.param(n, marks=pytest.mark.slow if n == "PrefillLeftovers" else ()) for n in sorted(CASES)]


def _run(name: str, reduce: bool, erase_all: bool = False, jobs: int = 1):  # noqa: ANN202
    depth, (live, arrivals), threshold, _ = CASES[name]
    cfg = explore_config("fixed-threshold")
    if threshold is not None:
        cfg = cfg.with_(disable_batch_threshold=threshold)
    real = explore_module.kept
    if erase_all:
        explore_module.kept = lambda ops: {}  # type: ignore[assignment]
    try:
        return explore(cfg, load_variant(f"{USER}:{name}"), alphabet=default_alphabet(max_live=live, max_arrivals=arrivals),
                       max_depth=depth, keep_graph=False, stop_at_first=True, reduce=reduce, max_states=30_000,
                       jobs=jobs)
    finally:
        explore_module.kept = real  # type: ignore[assignment]


@pytest.mark.parametrize("name", _TIERED)
def test_a_variant_reading_an_erased_field_gets_the_same_verdict_reduced_and_unreduced(name: str) -> None:
    want = CASES[name][-1]
    full, red = _run(name, False), _run(name, True)
    for r in (full, red):
        assert (len(r.counterexample) if r.counterexample else None) == want, (name, r.states)
        assert r.counterexample is None or r.violations, "the counterexample replays to a violation"
        assert r.counterexample is not None or r.complete
    assert red.kept and red.kept == kept(load_variant(f"{USER}:{name}").ops())


def test_the_parallel_search_keeps_what_the_serial_one_keeps() -> None:
    serial, par = _run("OlderDecision", True), _run("OlderDecision", True, jobs=2)
    assert (par.states, par.transitions, par.counterexample) == (serial.states, serial.transitions, serial.counterexample)


@pytest.mark.parametrize("name", _TIERED)
def test_the_erasing_search_gets_each_of_them_wrong(name: str) -> None:
    """What the issue found, for every erased field: with every erasure made regardless, the
    reduced search's verdict or length is not the true one (or its counterexample does not replay)."""
    want = CASES[name][-1]
    r = _run(name, True, erase_all=True)
    got = len(r.counterexample) if r.counterexample else None
    assert got != want or (r.counterexample is not None and not r.violations), name


def test_the_shrinkers_breadth_first_check_keeps_the_step_counter() -> None:
    """``shortest_violation`` (``minimize``'s proof of minimality) on a variant reading the step
    counter: the 5-action counterexample is found and is the shortest."""
    cfg = explore_config("fixed-threshold")
    v = load_variant(f"{USER}:EveryFifthStep")
    path, exhaustive = shortest_violation(cfg, v, default_alphabet(), max_depth=5)
    assert exhaustive and path is not None and len(path) == 5
    assert run_actions(cfg, v, path).violations


def test_explore_says_what_it_kept(capsys: pytest.CaptureFixture[str]) -> None:
    from specstate.cli import main

    rc = main(["explore", "--variant", f"{USER}:OlderDecision", "--depth", "3", "--jobs", "1", "--quiet"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "reduction: kept step counters, retraction counts, graph-buffer writers, finished requests' fields, " \
           "the decode batch's extend_lens, the older switch decision, radix node ids and access times, request ids " \
           "(symmetry) (variant overrides decide_speculation)" in out.err
    assert "reduction:" not in out.out


def test_prove_names_the_operations_its_intervals_cannot_see() -> None:
    """``prove`` erases no state; its intervals see a batch size only through ``bs_compare``, so a
    variant's own operation handed one is named (unless every bound runs)."""
    from specstate.fuzz.reads import interval_notes

    small = load_variant("tests.user_variants.mine:SmallThreshold").ops()
    assert interval_notes(small, exhaustive=False) == [
        "intervals: variant overrides decide_speculation: a batch size compared there counts only through "
        "bs_compare.at_most (docs/prove.md); --exhaustive checks every bound"]
    assert interval_notes(small, exhaustive=True) == []
    assert all(interval_notes(get_variant(n).ops(), exhaustive=False) == [] for n in variant_names())
