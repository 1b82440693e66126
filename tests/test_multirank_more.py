"""The multi-rank model's search, proof, graph, routing and start notes (issue 40's second part):
``explore`` reduced by rank rotation agrees with the unreduced search; ``prove`` over per-rank
batch-size multisets; ``graph`` draws a rank disagreement as such; ``--load-balance-method
total_requests`` and ``routed_dp_rank``; 0.5.17 / 0.5.23's start with adaptive under DP attention;
the PR #35898-shaped consensus."""

from __future__ import annotations

import json
import math
import random

import pytest

from specstate.cli import main
from specstate.errors import InvalidAction, UsageError
from specstate.model import Arrive, SpecConfig, Step
from specstate.multirank import RankConfig, RoutedArrive, explore_multi, make_model, multi_key, run_multi
from specstate.multirank._prove import prove_multi, vectors
from specstate.multirank._report import load_multi_trace, save_multi_trace
from specstate.multirank._run import random_actions
from specstate.multirank._start import adaptive_start
from specstate.multirank._step import multi_step

SEED = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 --speculative-disable-batch-threshold 5").split()
CFG = SpecConfig()
T1 = CFG.with_(disable_batch_threshold=1)


def model(policy: str, n: int = 2, cfg: SpecConfig = CFG, **kw: object):  # noqa: ANN201
    return make_model(cfg, RankConfig(n, n, True, **kw), policy)  # type: ignore[arg-type]


# -- explore: the rotation key ---------------------------------------------------------

@pytest.mark.parametrize("policy, fails", [("fixed-threshold", True), ("naive-threshold", True),
                                           ("dp-agreed-threshold", False), ("dp-global-sum", True)])
def test_reduced_search_agrees_with_the_unreduced_one(policy: str, fails: bool) -> None:
    m = model(policy, 2, T1)
    full = explore_multi(m, depth=6, reduce=False)
    red = explore_multi(m, depth=6, reduce=True)
    assert (full.counterexample is not None, red.counterexample is not None) == (fails, fails)
    if fails:
        assert len(red.counterexample.actions) == len(full.counterexample.actions)
        assert red.counterexample.violations[0].invariant == full.counterexample.violations[0].invariant
    else:
        assert red.states < full.states and red.reduced == "rotation"


def test_a_rotated_state_has_the_key_of_the_state_it_rotates() -> None:
    m = model("dp-agreed-threshold", 2)
    key, how = multi_key(m)
    plain = run_multi(m, [Arrive(8, 3), Step(), Step()]).outcomes[-1].state  # rank 0 holds it, counter 1
    routed = run_multi(m, [RoutedArrive(Arrive(8, 3), 1), Step(), Step()]).outcomes[-1].state  # rank 1, counter 0
    assert how == "rotation" and plain != routed and key(plain) == key(routed)
    other = run_multi(m, [RoutedArrive(Arrive(8, 3), 0), Step(), Step()]).outcomes[-1].state  # rank 0, counter 0
    assert key(other) != key(plain)  # the next arrival reaches the busy rank: not a rotation of it


def test_an_ordered_key_under_total_requests() -> None:
    m = model("dp-agreed-threshold", 2, load_balance_method="total_requests")
    assert multi_key(m)[1] == "ranks-ordered"


# -- routing ----------------------------------------------------------------------------

def test_total_requests_sends_to_the_least_loaded_lowest_rank() -> None:
    m = model("always-spec", 2, load_balance_method="total_requests")
    r = run_multi(m, [Arrive(8, 64)] * 3)
    s = r.outcomes[-1].state
    assert [rank for rank, _ in s.owner] == [0, 1, 0] and s.budget == (2, 1)
    r = run_multi(m, [Arrive(8, 64)] * 3 + [Step(), Step(), Arrive(8, 64)])
    s = r.outcomes[-1].state
    # after the decode each rank reported running + waiting (2, 1): the 4th goes to rank 1
    assert s.owner[3][0] == 1 and s.budget == (2, 2)


def test_a_routed_arrival_moves_no_counter_and_checks_its_rank() -> None:
    m = model("always-spec", 2)
    s = run_multi(m, [RoutedArrive(Arrive(8, 64), 1), Arrive(8, 64)]).outcomes[-1].state
    assert [rank for rank, _ in s.owner] == [1, 0] and s.round_robin_counter == 1
    with pytest.raises(InvalidAction, match="routed DP rank"):
        multi_step(m, s, RoutedArrive(Arrive(8, 64), 2))


def test_the_load_balance_flag(tmp_path) -> None:  # noqa: ANN001
    from specstate.multirank import dp_flags

    assert dp_flags(["--load-balance-method", "total_requests"]).ranks.load_balance_method == "total_requests"
    assert dp_flags(["--load-balance-method=auto"]).ranks.load_balance_method == "round_robin"
    with pytest.raises(UsageError, match="total_tokens"):
        dp_flags(["--load-balance-method", "total_tokens"])


def test_a_routed_trace_round_trips(tmp_path) -> None:  # noqa: ANN001
    m = model("fixed-threshold", 2, T1)
    actions = [RoutedArrive(Arrive(8, 64), 0), RoutedArrive(Arrive(8, 64), 0), Step(), Step()]
    r = run_multi(m, actions)
    assert not r.ok  # rank 0 at 2 falls back, idle rank 1 takes the idle verify
    path = save_multi_trace(r, m.config, tmp_path)
    data = json.loads(path.read_text())
    assert data["actions"][0] == {"op": "arrive", "prompt_len": 8, "max_new_tokens": 64, "routed_dp_rank": 0}
    m2, back, _ = load_multi_trace(path)
    assert back == actions and run_multi(m2, back).violations[0].step == r.violations[0].step


def test_the_fuzzer_routes_a_share_of_arrivals() -> None:
    m = model("always-spec", 2)
    plain = random_actions(random.Random(3), m, 30)
    assert not any(isinstance(a, RoutedArrive) for a in plain)
    mixed = random_actions(random.Random(3), m, 30, routed=0.5)
    assert any(isinstance(a, RoutedArrive) for a in mixed) and any(type(a) is Arrive for a in mixed)


# -- prove ------------------------------------------------------------------------------

def test_vectors_are_every_multiset_once() -> None:
    vs = vectors(range(4), 3)
    assert len(vs) == math.comb(3 + 3, 3) - 1 and len(set(vs)) == len(vs)
    assert all(list(v) == sorted(v, reverse=True) for v in vs)
    assert [v[0] for v in vs] == sorted(v[0] for v in vs)  # by the largest entry first


@pytest.mark.parametrize("policy, vector", [("fixed-threshold", (2, 0)), ("naive-threshold", (2, 0)),
                                            ("dp-global-sum", (2, 0)), ("dp-agreed-threshold", None),
                                            ("dp-consensus-min", None)])
def test_prove_at_dp2(policy: str, vector: tuple[int, ...] | None) -> None:
    r = prove_multi(model(policy, 2, T1), max_bs=4)
    assert r.failing_vector == vector
    assert r.exhaustive and (r.holds == (vector is None))
    if vector is None:
        assert r.vectors == 14 and r.orderings == 5 ** 2 - 1 and r.reached.get("plain") and r.reached.get("spec")


def test_prove_command_on_dp2(tmp_path, capsys) -> None:  # noqa: ANN001
    base = [*SEED, "--tp", "2", "--enable-dp-attention", "--dp", "2"]
    assert main(["prove", "--variant", "fixed-threshold", "--failures", str(tmp_path), "--", *base]) == 1
    out = capsys.readouterr().out
    assert "fails at per-rank batch sizes [6, 0]" in out and "reproduce with" in out
    trace = next(tmp_path.glob("multirank-*.json"))
    assert main(["reproduce", str(trace)]) == 1
    out = capsys.readouterr().out
    assert "[rank-collectives-agree]" in out and "coverage: judged: reproduce fixed-threshold" in out


# -- graph ------------------------------------------------------------------------------

def test_graph_draws_a_rank_disagreement(tmp_path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "g.dot"
    code = main(["graph", "--variant", "fixed-threshold", "--depth", "5", "--out", str(out), "--", *SEED,
                 "--speculative-disable-batch-threshold", "1", "--tp", "2", "--enable-dp-attention", "--dp", "2"])
    assert code == 0
    dot = out.read_text()
    assert "ranks disagree: rank-collectives-agree" in dot and "penwidth=3" in dot and "octagon" in dot
    assert "rank-disagreement edges" in capsys.readouterr().out
    good = tmp_path / "ok.json"
    assert main(["graph", "--variant", "dp-agreed-threshold", "--depth", "4", "--out", str(good), "--", *SEED,
                 "--speculative-disable-batch-threshold", "1", "--tp", "2", "--enable-dp-attention", "--dp", "2"]) == 0
    data = json.loads(good.read_text())
    assert data["links"] and not any(link["kind"] != "ok" for link in data["links"])


# -- 0.5.17 / 0.5.23 at start, and the consensus ------------------------------------------

@pytest.mark.parametrize("release, topk, reason", [
    ("0.5.17", "4", "speculative_eagle_topk=4 (only topk=1 is supported)"),  # the seed's launch stops here
    ("0.5.17", "1", "enable_dp_attention=True is not supported (adaptive tier decisions are not synchronized"),
    ("0.5.23", "1", "attention DP is not supported (adaptive tier decisions are not synchronized"),
])
def test_adaptive_under_dp_at_start(release: str, topk: str, reason: str) -> None:
    line = ["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", topk, "--speculative-adaptive",
            "--tp", "2", "--enable-dp-attention", "--dp", "2"]
    from specstate.server_args import rules

    dp_reason = rules(release).dp_adaptive_unsupported  # the release's own (its launch.py)
    got = adaptive_start(line, dp_reason)
    assert got is not None and got.startswith(f"speculative_adaptive disabled: {reason}")
    assert got.endswith("Falling back to static speculative params.")
    assert adaptive_start([t for t in line if t != "--speculative-adaptive"], dp_reason) is None
    assert rules("0.5.12").dp_adaptive_unsupported is None


def test_check_on_0_5_17_under_dp_says_what_upstream_says(capsys) -> None:  # noqa: ANN001
    code = main(["check", "--engine", "sglang-0.5.17", "--", "--speculative-algorithm", "EAGLE",
                 "--speculative-eagle-topk", "1", "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4",
                 "--speculative-adaptive", "--tp", "2", "--enable-dp-attention", "--dp", "2"])
    out = capsys.readouterr().out
    assert code == 4 and "speculative_adaptive disabled: enable_dp_attention=True is not supported" in out
    assert "verdict: NOT JUDGED" in out


def test_the_consensus_decides_as_the_agreed_threshold() -> None:
    a, b = model("dp-consensus-min", 4, T1), model("dp-agreed-threshold", 4, T1)
    for seed in range(6):
        acts = random_actions(random.Random(seed), a, 30)
        ra, rb = run_multi(a, acts), run_multi(b, acts)
        assert ra.ok and rb.ok
        assert [o.iteration.decision for o in ra.outcomes if o.iteration] == \
               [o.iteration.decision for o in rb.outcomes if o.iteration]


def test_prove_by_intervals_above_the_limit_and_a_bound_too_large() -> None:
    m = model("dp-agreed-threshold", 2, CFG.with_(max_running_requests=512))
    from specstate.multirank._prove import _values

    values, every = _values(m, 200)  # comb(202, 2) = 20,301 multisets: the interval points
    assert not every and values[0] == 0 and 4 in values and 6 in values and len(values) < 40  # 5 is 4's interval
    with pytest.raises(UsageError, match="expected a smaller --max-bs"):
        _values(model("dp-agreed-threshold", 8, CFG.with_(max_running_requests=512)), 64)


@pytest.mark.parametrize("policy", ["dp-agreed-threshold", "dp-global-sum", "fixed-threshold"])
def test_the_remembered_steps_are_the_steps(policy: str, monkeypatch) -> None:  # noqa: ANN001
    """``MultiModel.step`` (remembered; from the state without its gathered lists, then dressed; the
    first pass on the plain path under an agreed policy) gives the states, iterations and violations
    of ``step`` itself with the operations each rank runs."""
    from specstate.model import step as raw_step
    from specstate.multirank import _step as mod

    m = model(policy, 4, T1)
    runs = [random_actions(random.Random(seed), m, 25) for seed in range(4)]
    fast = [run_multi(m, acts) for acts in runs]

    def plain(self, state, action, which="ops", context=None):  # noqa: ANN001, ANN202
        ops = self.ops if which == "ops" else self.idle_batch_ops() if which is None else self.forced(bool(which))
        o = raw_step(state, action, ops)
        return mod._with_context(o, context) if context is not None else o

    monkeypatch.setattr(mod.MultiModel, "step", plain)
    monkeypatch.setattr(mod, "_PROBE", False)
    monkeypatch.setattr(mod.MultiModel, "violations", lambda self, o: __import__("specstate.invariants",
                                                                                 fromlist=["x"]).check_outcome(o))
    for acts, got in zip(runs, fast):
        want = run_multi(make_model(T1, RankConfig(4, 4, True), policy), acts)
        assert [o.state for o in got.outcomes] == [o.state for o in want.outcomes]
        assert [o.iteration for o in got.outcomes] == [o.iteration for o in want.outcomes]
        assert [v.describe() for v in got.violations] == [v.describe() for v in want.violations]


def test_routed_arrivals_search_the_orbit() -> None:
    """An alphabet of arrivals routed to every rank: every rotation is a symmetry (the key is the
    orbit); the reduced search finds the unreduced one's shortest failure."""
    m = model("fixed-threshold", 2, T1)
    full = explore_multi(m, depth=5, reduce=False, routed=True)
    red = explore_multi(m, depth=5, reduce=True, routed=True)
    assert red.reduced == "orbit" and full.counterexample is not None and red.counterexample is not None
    assert len(red.counterexample.actions) == len(full.counterexample.actions)
    assert any(isinstance(a, RoutedArrive) for a in red.counterexample.actions)
