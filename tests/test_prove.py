"""``specstate prove``: the batch-size classes, the verdicts, the trace it writes, and the
abstraction checked against concrete exploration (``fuzz/explore.py``) on small bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specstate.cli import main
from specstate.fuzz.explore import DEFAULT_EXPLORE_CONFIG, explore
from specstate.fuzz.reproduce import EXIT_VIOLATION, reproduce_file
from specstate.fuzz.trace import save_trace
from specstate.model import Arrive, get_variant, variant_names
from specstate.prove import Lengths, bs_class, capture_lists, prove, prove_config, representatives
from specstate.prove._scripts import proof_alphabet
from specstate.check_result import failure_trace
from specstate.scenarios import SEED_CONFIG

#: the explore config's shapes (2 steps, topk 2, 4 draft tokens, threshold 2, graphs at 1 and 4)
#: with a pool that holds the bounds compared below
ROOMY = DEFAULT_EXPLORE_CONFIG.with_(target_kv_pool_size=512, draft_kv_pool_size=512)
SHORT = Lengths(prompt_len=4)
V1_VARIANTS = sorted({get_variant(n).name for n in variant_names() if get_variant(n).family_name == "sglang-0.5.12"})


def test_batch_size_classes_of_the_seed_config() -> None:
    cfg = prove_config(SEED_CONFIG, 256, None)  # captures 1..8, 10, 12, 14, 16; threshold 5
    assert [bs_class(cfg, b).graph for b in (5, 9, 16, 17)] == ["exact", "padded", "exact", "eager"]
    assert [bs_class(cfg, b).decision for b in (5, 6)] == [True, False]
    # largest of each class below 20 (shrink targets), smallest (jump sources)
    assert representatives(cfg, 20) == ((5, 15, 16, 19), (1, 6, 9, 17))
    assert representatives(cfg, 1) == ((), ())
    lists = capture_lists(cfg, 12)
    assert lists["single"] == (12,) and lists["one"] == (1,) and lists["every"] == tuple(range(1, 13))


def test_naive_threshold_fails_first_above_the_threshold_and_the_trace_replays(tmp_path: Path) -> None:
    r = prove(SEED_CONFIG, "naive-threshold", 9)
    f = r.failure
    assert f is not None and f.bound == SEED_CONFIG.disable_batch_threshold + 1 == 6
    assert f.violations[0].invariant == "worker-crash"
    assert len(r.lists) == 5 and all(v.checked_up_to == 5 for v in r.lists)  # every list holds below 6
    path = save_trace(failure_trace(r, "naive-threshold"), tmp_path)
    rep = reproduce_file(path)
    assert rep.exit_code == EXIT_VIOLATION and "same violation as recorded" in rep.report
    assert sum(isinstance(a, Arrive) for a in f.actions) == 6  # six requests in all: the bound is the batch


def test_fixed_threshold_holds_and_crosses_the_switch_both_ways() -> None:
    r = prove(SEED_CONFIG, "fixed-threshold", 18)
    assert r.holds, r.verdict()
    assert r.verdict() == "holds for all bs <= 18"
    assert all(v.checked_up_to == 18 for v in r.lists) and len(r.lists) == 5
    reached = set().union(*(v.witnesses for v in r.lists))
    assert {"crossed-up", "crossed-down", "spec-resumed", "padded-graph-batch", "padded-after-larger",
            "all-finished-while-off", "idle-then-arrivals"} <= reached


def test_a_pool_too_small_for_the_bound_is_inconclusive_not_a_proof() -> None:
    r = prove(DEFAULT_EXPLORE_CONFIG, "fixed-threshold", 4, lists=("config",), lengths=SHORT)  # 26 KV slots
    assert not r.holds and r.failure is None
    assert r.verdict().startswith("inconclusive: holds for bs <= ") and "not reached" in r.verdict()


def _explored_smallest_failing_bs(variant: str, bound: int, depth: int) -> int | None:
    """The smallest ``max_live`` whose exploration finds a violation, searched from ``bound`` down:
    ``proof_alphabet``'s actions at ``max_live`` k are a subset of those at k + 1 in every state, so
    what k reaches within ``depth`` k + 1 reaches too, and a violation at k is one at every larger
    bound. The first bound that holds ends the search: a correct variant is explored once, at
    ``bound`` (it was every bound from 1 up: a third of the time at bound 3, for the same answer)."""
    cfg = prove_config(ROOMY, bound, None)
    smallest = None
    for live in range(bound, 0, -1):
        res = explore(cfg, variant, alphabet=proof_alphabet(cfg, bound, SHORT, max_live=live), max_depth=depth,
                      stop_at_first=True, keep_graph=False, reduce=True)  # the same verdicts: test_explore_reduce
        if res.counterexample is None:
            break
        smallest = live
    return smallest


def assert_abstract_verdict_equals_exploration(variant: str, bound: int, depth: int) -> None:
    """The smallest failing bs of the proof (bs <= ``bound``) is the smallest ``max_live`` at which
    breadth-first search over the proof's own actions (every sequence up to ``depth``, not only the
    proof's scripts) finds a violation; "holds" is "none found"."""
    proved = prove(ROOMY, variant, bound, lists=("config",), lengths=SHORT)
    assert proved.unreached is None
    got = proved.failure.bound if proved.failure is not None else None
    assert got == _explored_smallest_failing_bs(variant, bound, depth), proved.verdict()


@pytest.mark.parametrize("variant", V1_VARIANTS)
def test_the_abstract_verdict_equals_concrete_exploration(variant: str) -> None:
    """bs <= 2, depth 6 (``tests/fuzz/test_prove_explore.py``: bs <= 3, depth 7)."""
    assert_abstract_verdict_equals_exploration(variant, 2, 6)


def test_cli_prove_json_trace_and_reproduce(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["prove", "--variant", "naive-threshold", "--max-bs", "8", "--capture-lists", "config,one",
               "--failures", str(tmp_path), "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["kind"] == "prove" and not out["ok"]
    assert out["details"]["failing_bs"] == 6 and out["violation"]["invariant"] == "worker-crash"
    assert out["reproduce"] == f"specstate reproduce {out['trace']}"
    assert main(["reproduce", out["trace"], "--quiet"]) == EXIT_VIOLATION
    assert "same violation as recorded" in capsys.readouterr().out


def test_cli_prove_holds_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--max-bs", "7", "--capture-lists", "single", "--quiet"]) == 0
    assert "holds for all bs <= 7" in capsys.readouterr().out
    assert main(["prove", "--max-bs", "0"]) == 2
    assert main(["prove", "--capture-lists", "config,nope"]) == 2
    assert "Expected --capture-lists" in capsys.readouterr().err
