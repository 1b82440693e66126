"""The multi-rank model (specstate.multirank): DP attention, the MLP sync, the collectives, the
policies, and the CLI on DP launches. Figures cross-checked with every-rank.md's table (upstream
0.5.12's own code on gloo ranks): the MLP sync lists of §7, the rows of N1, X2, G2."""

from __future__ import annotations

import json

import pytest

from specstate.cli import main
from specstate.errors import UsageError
from specstate.model import Arrive, SpecConfig, Step
from specstate.multirank import (Collective, RankConfig, RankIteration, RankPath, dp_flags, dp_launch, explore_multi,
                                 fuzz_multi, get_policy, make_model, run_multi, sweep_multi)
from specstate.multirank._invariants import graph_rows
from specstate.multirank._report import load_multi_trace, save_multi_trace, shortest_burst

SEED = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 --speculative-disable-batch-threshold 5").split()
CFG = SpecConfig()  # the seed's: steps 3, topk 4, 16 draft tokens, graphs to bs 16, threshold 5


def dp(n: int, **kw: object) -> RankConfig:
    return RankConfig(dp_size=n, tp_size=kw.pop("tp", n), enable_dp_attention=True, **kw)  # type: ignore[arg-type]


def model(policy: str, n: int = 8, cfg: SpecConfig = CFG, **kw: object):  # noqa: ANN201
    return make_model(cfg, dp(n, **kw), policy)


def burst(c: int, steps: int = 2, prompt: int = 12) -> list:
    return [Arrive(prompt, 64)] * c + [Step()] * steps


def target(r, step_index: int, rank: int) -> Collective:  # noqa: ANN001
    it = r.outcomes[step_index - 1].iteration
    return [c for c in it.collectives[rank] if c.kind.startswith("target:")][0]


# -- launch flags ----------------------------------------------------------------------

@pytest.mark.parametrize("flags, dp_size, attn_tp, multi", [
    ("--tp 8 --enable-dp-attention --dp 8", 8, 1, True),
    ("--tp-size 8 --enable-dp-attention --dp-size=2", 2, 4, True),  # attention TP tp // dp
    ("--tp 8 --enable-dp-attention --dp 1", 1, 8, False),  # dp 1 turns DP attention off
    ("--tp 8 --dp 8", 8, 8, False),  # DP without DP attention: separate servers, not modelled here
])
def test_dp_flags(flags: str, dp_size: int, attn_tp: int, multi: bool) -> None:
    got = dp_flags(SEED + flags.split())
    assert (got.ranks.dp_size, got.ranks.attn_tp_size, got.ranks.multi) == (dp_size, attn_tp, multi)
    assert list(got.rest) == SEED
    assert (dp_launch(SEED + flags.split()) is not None) == multi


def test_tp_not_a_multiple_of_dp_is_refused() -> None:
    with pytest.raises(UsageError, match="multiple of --dp-size 3"):
        dp_flags(["--tp", "8", "--enable-dp-attention", "--dp", "3"])


def test_dp_lm_head_with_a2a_gathers_local_counts_only() -> None:
    rc = dp_flags("--tp 8 --enable-dp-attention --dp 8 --enable-dp-lm-head --moe-dense-tp-size 1 "
                  "--moe-a2a-backend deepep".split()).ranks
    assert not rc.require_mlp_tp_gather  # utils/common.py::require_mlp_tp_gather; every-rank.md D6
    assert dp(8).require_mlp_tp_gather


# -- routing and the MLP sync ----------------------------------------------------------

def test_round_robin_and_the_gathered_lists_match_upstream_on_8_ranks() -> None:
    r = run_multi(model("always-spec"), burst(10))
    owners = [rank for rank, _ in r.outcomes[-1].state.owner]
    assert owners == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]
    extend, decode = r.outcomes[10].iteration, r.outcomes[11].iteration
    # every-rank.md §7, measured on upstream's Scheduler: [24,24,12,...] then [2,2,1,...]
    assert extend.syncs[0].global_num_tokens == (24, 24, 12, 12, 12, 12, 12, 12)
    assert extend.syncs[0].is_extend_in_batch and len(extend.syncs) == 1
    assert [s.purpose for s in decode.syncs] == ["prefill-first", "decode"]
    assert decode.syncs[1].global_num_tokens == (2, 2, 1, 1, 1, 1, 1, 1)


def test_upstream_verifies_through_one_bucket_on_every_rank() -> None:
    r = run_multi(model("always-spec"), burst(10))
    assert r.ok
    # N1: verify graph bs 2 everywhere, 32 rows per rank
    assert {target(r, 12, k).describe() for k in range(8)} == {
        "target:dp-gather MAX_LEN sizes [32, 32, 32, 32, 32, 32, 32, 32] own 32 (graph TARGET_VERIFY@2)"}


def test_a_rank_with_nothing_to_prefill_idles_while_another_prefills() -> None:
    m = model("always-spec", 2)
    r = run_multi(m, [Arrive(8, 64), Step(), Arrive(8, 64), Step(), Step()])
    it = r.outcomes[3].iteration  # rank 0: its decode waits, rank 1: prefill
    assert [p.batch for p in it.paths] == ["idle", "prefill"] and [p.path for p in it.paths] == ["extend", "extend"]
    assert r.ok


# -- the local decision is unsafe -------------------------------------------------------

def test_fixed_threshold_c46_on_8_ranks_disagrees_as_measured() -> None:
    r = run_multi(model("fixed-threshold"), burst(46))
    v = r.violations[0]
    assert (v.invariant, v.step, v.rank) == ("rank-collectives-agree", 48, 6)
    # X2: the ranks at 6 run an eager plain decode (6 rows), the ranks at 5 the verify graph (96 rows)
    assert target(r, 48, 0).describe() == "target:dp-gather MAX_LEN sizes [6, 6, 6, 6, 6, 6, 6, 6] own 6 (eager)"
    assert target(r, 48, 7).describe() == \
        "target:dp-gather MAX_LEN sizes [96, 96, 96, 96, 96, 96, 96, 96] own 96 (graph TARGET_VERIFY@6)"
    assert "rank-path-agrees" in [x.invariant for x in r.violations]


@pytest.mark.parametrize("n, requests", [
    (8, 41),  # round robin: 41 requests give rank 0 six, the others five
    (2, 11),
    (4, 21),
])
def test_shortest_burst_of_the_fixed_patch(n: int, requests: int) -> None:
    r = shortest_burst(model("fixed-threshold", n), max_c=7 * n)
    assert r is not None and len(r.actions) == requests + 2
    assert sum(isinstance(a, Arrive) for a in r.actions) == requests


def test_naive_threshold_crashes_on_the_ranks_that_fall_back() -> None:
    r = run_multi(model("naive-threshold"), burst(46))
    crashes = [v for v in r.violations if v.invariant == "rank-model" and "worker-crash" in v.field]
    assert crashes and {v.rank for v in crashes} <= set(range(6)) and "96" in str(crashes[0].actual) + crashes[0].detail


def test_global_sum_leaves_idle_ranks_on_the_idle_verify() -> None:
    r = run_multi(model("dp-global-sum"), burst(6))  # G2: ranks 6-7 idle
    v = r.violations[0]
    assert v.invariant == "rank-collectives-agree" and v.rank == 6
    assert target(r, 8, 0).own == 1 and target(r, 8, 0).graph is None
    assert (target(r, 8, 6).own, target(r, 8, 6).graph) == (16, "TARGET_VERIFY@1")


def test_sum_before_extend_sends_an_extend_iteration_into_plain_decode() -> None:
    r = run_multi(model("dp-sum-before-extend", 2), [Arrive(12, 64), Step()])
    v = r.violations[0]
    assert (v.invariant, v.step, v.rank, v.expected, v.actual) == ("rank-path-agrees", 2, 1, "extend (as rank 0)", "plain")


def test_a2a_collectives_are_compared_by_count_only() -> None:
    r = run_multi(model("fixed-threshold", enable_dp_lm_head=True, moe_dense_tp_size=1, moe_a2a_backend="deepep"),
                  burst(46))
    assert [v.invariant for v in r.violations] == ["rank-path-agrees"]
    assert target(r, 48, 0).kind == "target:a2a"


def test_a_one_row_source_into_a_graph_slice_is_a_violation() -> None:
    sixteen = Collective("target:dp-gather", "MAX_LEN", (16, 16), 16, graph="TARGET_VERIFY@1")
    it = RankIteration(3, (), (RankPath("naive", "decode", 1, 1, 1), RankPath("spec", "decode", 1, 16, 16)),
                       ((sixteen,), (sixteen,)))
    (v,) = graph_rows(it, 16)
    assert (v.rank, v.actual, v.detail) == (0, 1, "TARGET_VERIFY@1: the copy broadcast silently")


# -- the corrected patch ----------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 8])
def test_the_agreed_decision_passes_the_burst(n: int) -> None:
    assert shortest_burst(model("dp-agreed-threshold", n), max_c=7 * n) is None


def test_the_agreed_decision_passes_the_sweep_on_2_ranks() -> None:
    r = sweep_multi(model("dp-agreed-threshold", 2))
    assert r.ok and r.stats["plain"] > 0 and r.stats["spec"] > 0 and r.stats["idle_rank_iterations"] > 0


def test_the_agreed_decision_is_applied_on_idle_ranks() -> None:
    r = run_multi(model("dp-agreed-threshold", 2), [Arrive(12, 64)] * 6 + [Step(), Step()])
    it = r.outcomes[-1].iteration  # ranks 6 / 0 requests... 3 and 3: all speculate
    assert r.ok and it.decision == "speculate"
    r = run_multi(model("dp-agreed-threshold", 8), burst(46 + 2))
    assert r.ok and r.outcomes[-1].iteration.decision == "plain"


def test_explore_at_dp2_finds_the_shortest_counterexample() -> None:
    cfg = CFG.with_(disable_batch_threshold=1)
    bad = explore_multi(model("fixed-threshold", 2, cfg), depth=6)
    assert bad.counterexample is not None and len(bad.counterexample.actions) == 5
    good = explore_multi(model("dp-agreed-threshold", 2, cfg), depth=5)
    assert good.counterexample is None and good.states > 100


def test_fuzz_is_deterministic_and_finds_the_local_decision() -> None:
    m = model("fixed-threshold", 2)
    a, _ = fuzz_multi(m, seed=3, cases=50)
    b, _ = fuzz_multi(m, seed=3, cases=50)
    assert a is not None and b is not None and a.actions == b.actions
    assert fuzz_multi(model("dp-agreed-threshold", 2), seed=3, cases=30)[0] is None


def test_trace_round_trip(tmp_path) -> None:  # noqa: ANN001
    r = run_multi(model("fixed-threshold", 2), burst(11))
    path = save_multi_trace(r, CFG, tmp_path)
    m, actions, data = load_multi_trace(path)
    again = run_multi(m, actions)
    assert data["multirank"]["dp_size"] == 2 and again.violations[0] == r.violations[0]


def test_unknown_policy() -> None:
    with pytest.raises(UsageError, match="multi-rank variant"):
        get_policy("nope")


# -- the commands ----------------------------------------------------------------------

def test_check_fixed_threshold_dp8_fails_with_the_ranks_disagreeing(tmp_path, capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "fixed-threshold", "--failures", str(tmp_path), "--budget", "1",
                 "--max-examples", "3", "--", *SEED, "--tp", "8", "--enable-dp-attention", "--dp", "8"])
    out = capsys.readouterr().out
    assert code == 1
    assert "verdict: FAIL" in out and "1-41: 41 x" in out
    assert "rank 0: plain (decode, 6 rows) -> target:dp-gather MAX_LEN sizes [6, 6, 6, 6, 6, 6, 6, 6] own 6 (eager)" in out
    assert "ranks 1-7: spec (decode, 5 rows)" in out and "(graph TARGET_VERIFY@6)" in out
    trace = next(tmp_path.glob("multirank-*.json"))
    assert json.loads(trace.read_text())["violation"]["invariant"] == "rank-collectives-agree"
    assert main(["reproduce", str(trace)]) == 1


def test_check_the_agreed_patch_on_dp2_passes(capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "dp-agreed-threshold", "--budget", "1", "--max-examples", "3", "--",
                 *SEED, "--tp", "2", "--enable-dp-attention", "--dp", "2"])
    assert code == 0 and "verdict: PASS" in capsys.readouterr().out


def test_dp1_launch_is_not_multirank(capsys) -> None:  # noqa: ANN001
    # --dp 1: sglang turns DP attention off; the single-rank check judges the launch as before
    # (exit 4: the single-rank check says --tp-size 8 is outside the one-rank model, docs/check.md)
    code = main(["check", "--variant", "fixed-threshold", "--parts", "start", "--", *SEED, "--tp", "8", "--dp", "1"])
    out = capsys.readouterr().out
    assert code == 4 and "DP attention over" not in out and "--tp-size 8" in out


def test_a_dp_variant_needs_a_dp_launch(capsys) -> None:  # noqa: ANN001
    assert main(["run", "--variant", "dp-agreed-threshold", "--", *SEED]) == 2
    assert "expected --enable-dp-attention" in capsys.readouterr().err


def test_v2_engines_under_dp_attention_say_adaptive_is_off(capsys) -> None:  # noqa: ANN001
    code = main(["run", "--engine", "sglang-0.5.17", "--", "--speculative-algorithm", "EAGLE3", "--speculative-adaptive", "--tp", "2",
                 "--enable-dp-attention", "--dp", "2"])
    assert code == 2 and "_maybe_disable_adaptive" in capsys.readouterr().err


def test_explore_command_on_dp2(tmp_path, capsys) -> None:  # noqa: ANN001
    code = main(["explore", "--variant", "fixed-threshold", "--depth", "6", "--failures", str(tmp_path), "--",
                 *SEED, "--speculative-disable-batch-threshold", "1", "--tp", "2", "--enable-dp-attention", "--dp", "2"])
    out = capsys.readouterr().out
    assert code == 1 and "shortest counterexample: FAIL after 5 actions" in out


def test_eos_given_while_a_rank_waits_stays_pending() -> None:
    """Found by the N-rank oracle: a rank forced IDLE by another's prefill keeps the EOS the step
    named for its requests (upstream samples it at the request's next token)."""
    m = model("always-spec", 2)
    r = run_multi(m, [Arrive(8, 64), Step(), Arrive(8, 64), Step((), (0,)), Step(), Step()])
    assert r.ok
    it = r.outcomes[3].iteration
    assert [p.batch for p in it.paths] == ["idle", "prefill"]
    assert r.outcomes[4].iteration.syncs[-1].global_num_tokens == (1, 1)  # rid 0 decodes its EOS
    assert r.outcomes[5].iteration.syncs[-1].global_num_tokens == (0, 1)  # and is gone


def test_a_waiting_rank_keeps_its_finished_rows_and_an_idle_batch_skips_on_idle() -> None:
    """Found by the N-rank oracle at dp 8 (upstream admitted 1 where the model admitted 3): a rank
    forced IDLE by another's prefill runs no ``update_running_batch`` (its finished rows stay and
    count against ``max_running_requests``), and a rank running an IDLE batch because another rank
    decodes is not idle (``on_idle`` does not reset ``new_token_ratio``)."""
    r = run_multi(model("always-spec", 2), [Arrive(8, 2), Step(), Step((4,)), Arrive(8, 4), Step(), Step()])
    waiting, after = r.outcomes[4].state.ranks[0], r.outcomes[5].state.ranks[0]
    assert [p.batch for p in r.outcomes[4].iteration.paths] == ["idle", "prefill"]
    assert waiting.running.rids == (0,) and not waiting.req(0).live
    assert after.running.rids == () and after.new_token_ratio < after.config.init_new_token_ratio


def test_fuzz_command_shrinks_to_the_shortest_burst(tmp_path, capsys) -> None:  # noqa: ANN001
    code = main(["fuzz", "--variant", "fixed-threshold", "--failures", str(tmp_path), "--max-examples", "20", "--",
                 *SEED, "--tp", "2", "--enable-dp-attention", "--dp", "2"])
    out = capsys.readouterr().out
    assert code == 1 and "to 13 actions" in out  # 11 requests (6 on rank 0, 5 on rank 1), prefill, decode


# -- the coverage block and exit codes of a DP check (issue 36) ---------------------------

def _dp_check_json(capsys, *extra: str) -> tuple[int, dict]:  # noqa: ANN001
    code = main(["check", "--variant", "dp-agreed-threshold", "--budget", "1", "--max-examples", "3", "--json", "--",
                 *SEED, "--tp", "2", "--enable-dp-attention", "--dp", "2", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_a_dp_check_carries_the_coverage_block(capsys) -> None:  # noqa: ANN001
    code, data = _dp_check_json(capsys)
    assert code == 0 and data["verdict"] == "pass" and data["exit_code"] == 0 and data["details"]["multirank"]
    cov = data["coverage"]
    assert set(cov) == {"judged", "modelled", "not_judged", "unaffected", "not_examined", "derived", "assumed",
                        "environment", "reached", "not_reached"}
    assert "DP attention over 2 ranks" in cov["judged"] and cov["not_judged"] == []
    assert {"--enable-dp-attention", "--dp-size 2", "--tp-size 2", "--speculative-num-steps"} <= set(cov["modelled"])
    assert any(a["setting"] == "context_length" for a in cov["assumed"])
    assert any(r.startswith("plain decode iterations") for r in cov["reached"])


@pytest.mark.parametrize("extra", [
    ("--moe-a2a-backend", "deepep"),  # the DP gather is shaped, the MoE all-to-all is not
    ("--moe-a2a-backend", "deepep", "--enable-dp-lm-head", "--moe-dense-tp-size", "1"),  # a2a collectives counted only
])
def test_an_a2a_backend_is_not_judged_for_the_collective_sizes(capsys, extra) -> None:  # noqa: ANN001
    code, data = _dp_check_json(capsys, *extra)
    assert code == 4 and data["verdict"] == "not judged" and data["exit_code"] == 4 and not data["ok"]
    (nj,) = data["coverage"]["not_judged"]
    assert nj["flag"] == "--moe-a2a-backend deepep" and "collective sizes" in nj["parts"]
    assert "--moe-a2a-backend deepep" not in data["coverage"]["modelled"]


def test_a_dp_check_text_says_not_judged_and_prints_coverage(capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "dp-agreed-threshold", "--budget", "1", "--max-examples", "3", "--",
                 *SEED, "--tp", "2", "--enable-dp-attention", "--dp", "2", "--attention-backend", "fa3", "--pp-size", "2"])
    out = capsys.readouterr().out
    assert code == 4 and "verdict: NOT JUDGED" in out and "verdict: PASS" not in out
    assert "NOT JUDGED: --pp-size 2" in out and "coverage: judged: check dp-agreed-threshold" in out


def test_a_failing_dp_check_json_is_a_violation_with_coverage(tmp_path, capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "fixed-threshold", "--failures", str(tmp_path), "--budget", "1",
                 "--max-examples", "3", "--json", "--", *SEED, "--tp", "2", "--enable-dp-attention", "--dp", "2",
                 "--moe-a2a-backend", "deepep"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["verdict"] == "violation" and data["exit_code"] == 1  # a violation wins over not judged
    assert data["violation"]["invariant"].startswith("rank-") and data["reproduce"].startswith("specstate reproduce ")
    assert data["coverage"]["not_judged"] and data["details"]["parts"]["burst"] in ("passed", "failed")


@pytest.mark.parametrize("argv", [["run"], ["fuzz", "--max-examples", "3"], ["explore", "--depth", "3"]],
                         ids=["run", "fuzz", "explore"])
def test_every_dp_command_carries_the_coverage_block(argv, capsys) -> None:  # noqa: ANN001
    code = main([*argv, "--variant", "dp-agreed-threshold", "--json", "--", *SEED, "--tp", "2", "--enable-dp-attention",
                 "--dp", "2", "--moe-a2a-backend", "deepep"])
    data = json.loads(capsys.readouterr().out)
    assert code == 4 and data["verdict"] == "not judged" and data["details"]["multirank"]
    assert data["coverage"]["not_judged"][0]["flag"] == "--moe-a2a-backend deepep"
    assert "--dp-size 2" in data["coverage"]["modelled"]
