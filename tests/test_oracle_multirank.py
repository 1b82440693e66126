"""The N-rank oracle (specstate.oracle.multirank): upstream sglang 0.5.12's Scheduler with DP
attention on 2 gloo processes, compared with the multi-rank model rank by rank. Needs the 0.5.12
wheel (``.specstate-cache/wheels``); without it the tests skip with one line."""

from __future__ import annotations

import pytest

from specstate.model import Arrive, SpecConfig, Step
from specstate.multirank import RankConfig, make_model, per_rank_config, run_multi
from specstate.oracle.multirank import RankOracle, compare, fuzz_ranks, oracle_config

CFG = SpecConfig(target_kv_pool_size=8192, draft_kv_pool_size=8192)


@pytest.fixture(scope="module")
def oracle():  # noqa: ANN201
    from specstate.oracle.wheels import OracleUnavailable, cache_dir, unpacked

    try:
        unpacked("0.5.12")
    except OracleUnavailable:
        pytest.skip(f"sglang 0.5.12: no wheel in {cache_dir() / 'wheels'} and no package registry to fetch it")
    with RankOracle(2) as o:
        yield o


def _model(policy: str = "always-spec", cfg: SpecConfig = CFG):  # noqa: ANN202
    ranks = RankConfig(2, 2, True)
    return make_model(per_rank_config(cfg, ranks), ranks, policy)


def test_upstream_gathers_what_the_model_gathers(oracle: RankOracle) -> None:
    actions = [Arrive(12, 4)] * 3 + [Step()] + [Arrive(12, 4)] + [Step((2, 2))] * 5
    mine = run_multi(_model(), actions)
    theirs = oracle.run(oracle_config(CFG, 2), actions)
    assert compare(mine, theirs) is None
    first = theirs[0]["iterations"][0]
    assert first == {"syncs": [[[24, 12], True]], "batch": "prefill", "rows": 2}  # prefill-first sync
    assert theirs[0]["iterations"][1]["batch"] == "idle"  # rank 0's decode waits while rank 1 prefills


def test_fuzzed_workloads_agree(oracle: RankOracle) -> None:
    ran, bad, _ = fuzz_ranks(oracle, CFG, cases=12, seed=7)
    assert bad is None, bad.describe()
    assert ran == 12


def test_a_local_decision_in_the_model_is_caught(oracle: RankOracle) -> None:
    """Model mutation: the ranks decide locally (fixed-threshold at 1) where upstream speculates."""
    cfg = CFG.with_(disable_batch_threshold=1)
    ran, bad, _ = fuzz_ranks(oracle, cfg, cases=12, seed=7, policy="fixed-threshold")
    assert bad is not None and bad.field in ("rows", "syncs", "batch")


def test_eos_while_a_rank_waits(oracle: RankOracle) -> None:
    """The first mismatch the fuzz found (fixed): EOS named while rank 0 idles for rank 1's prefill."""
    actions = [Arrive(8, 64), Step(), Arrive(8, 64), Step((), (0,)), Step(), Step()]
    assert compare(run_multi(_model(), actions), oracle.run(oracle_config(CFG, 2), actions)) is None


def test_the_oracle_command_takes_dp_on_0_5_12_only(capsys) -> None:  # noqa: ANN001
    from specstate.cli import main

    assert main(["oracle", "--engine", "0.5.17", "--dp", "2", "--examples", "1"]) == 2
    assert "expected --engine 0.5.12" in capsys.readouterr().err


def test_routed_and_least_loaded_workloads_agree(oracle: RankOracle) -> None:
    """Arrivals naming their rank (``routed_dp_rank``) and ``--load-balance-method total_requests``:
    the oracle's ranks take the arrivals the model routed to them; their schedulers then agree."""
    ran, bad, _ = fuzz_ranks(oracle, CFG, cases=8, seed=11, routed=0.4)
    assert bad is None, bad.describe()
    ran, bad, _ = fuzz_ranks(oracle, CFG, cases=8, seed=12, method="total_requests")
    assert bad is None, bad.describe()
    assert ran == 8
